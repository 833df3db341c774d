module cloudzones.dev/bench/loadgen

go 1.22
