"""The PV-label admission webhook: a pure review function (`review`) and a TLS-only HTTP server (`server`)."""
