// Command loadgen posts one AdmissionReview body to a webhook over TLS keep-alive connections, as the Go
// API server's webhook client does (net/http, HTTP/1.1), and prints what it measured as one JSON object.
//
// Each of -c connections is a goroutine with its own connection: a closed loop (the next request as soon
// as the answer is read) or, with -rate, an open loop where each connection sends on its own schedule and
// latency counts from the scheduled time (no coordinated omission). -warmup requests per connection go
// first, untimed. Output: {"seconds", "latencies" (seconds each), "failures" (first few), "cpuSeconds"
// (this process's user+system time over the timed part)}.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

type result struct {
	Seconds    float64   `json:"seconds"`
	Latencies  []float64 `json:"latencies"`
	Failures   []string  `json:"failures"`
	CPUSeconds float64   `json:"cpuSeconds"`
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
}

func main() {
	url := flag.String("url", "", "https://host:port/path")
	caFile := flag.String("ca", "", "PEM file of the CA that signed the server's certificate")
	bodyFile := flag.String("body", "", "the request body")
	total := flag.Int("n", 5000, "timed requests in all")
	conns := flag.Int("c", 1, "connections (one goroutine each)")
	rate := flag.Float64("rate", 0, "requests/s in all for an open loop (0: closed loops)")
	warmup := flag.Int("warmup", 50, "untimed requests per connection first")
	flag.Parse()

	pem, err := os.ReadFile(*caFile)
	check(err)
	body, err := os.ReadFile(*bodyFile)
	check(err)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		check(fmt.Errorf("no certificate in %s", *caFile))
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: *conns, MaxConnsPerHost: *conns, ForceAttemptHTTP2: false,
	}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	var mu sync.Mutex
	out := result{Latencies: make([]float64, 0, *total), Failures: []string{}}
	post := func() {
		request, _ := http.NewRequest(http.MethodPost, *url, bytes.NewReader(body))
		request.Header.Set("Content-Type", "application/json")
		response, err := client.Do(request)
		if err != nil {
			mu.Lock()
			out.Failures = append(out.Failures, err.Error())
			mu.Unlock()
			return
		}
		payload, err := io.ReadAll(response.Body)
		response.Body.Close()
		if err != nil || response.StatusCode != http.StatusOK || !bytes.Contains(payload, []byte(`"allowed":true`)) {
			mu.Lock()
			out.Failures = append(out.Failures, fmt.Sprintf("HTTP %d: %.200s %v", response.StatusCode, payload, err))
			mu.Unlock()
		}
	}

	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < *conns; i++ {
		count := *total / *conns
		if i < *total%*conns {
			count++
		}
		ready.Add(1)
		done.Add(1)
		go func(index, count int) {
			defer done.Done()
			for j := 0; j < *warmup; j++ {
				post()
			}
			ready.Done()
			<-start
			first := time.Now()
			if *rate > 0 {
				first = first.Add(time.Duration(float64(index) / *rate * float64(time.Second)))
			}
			latencies := make([]float64, 0, count)
			for j := 0; j < count; j++ {
				began := time.Now()
				if *rate > 0 {
					due := first.Add(time.Duration(float64(j) * float64(*conns) / *rate * float64(time.Second)))
					if wait := time.Until(due); wait > 0 {
						time.Sleep(wait)
					}
					began = due
				}
				post()
				latencies = append(latencies, time.Since(began).Seconds())
			}
			mu.Lock()
			out.Latencies = append(out.Latencies, latencies...)
			mu.Unlock()
		}(i, count)
	}
	ready.Wait()
	cpu := cpuSeconds()
	began := time.Now()
	close(start)
	done.Wait()
	out.Seconds = time.Since(began).Seconds()
	out.CPUSeconds = cpuSeconds() - cpu
	if len(out.Failures) > 5 {
		out.Failures = out.Failures[:5]
	}
	check(json.NewEncoder(os.Stdout).Encode(out))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}
