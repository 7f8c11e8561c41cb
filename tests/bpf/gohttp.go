// gohttp.go - a Go HTTP client for the kernel-side backend's HTTP tests
// (tests/bpf/http.sh), built with CGO_ENABLED=0: the shim cannot reach it.
//   gohttp URL [h2]: one GET, with its own crypto/tls trusting what Go
//   trusts (SSL_CERT_FILE, else the system's roots); prints the status
//   code, or "error: " and Go's own error. With h2 the client offers h2
//   by ALPN (Go's default transport does) and prints the protocol too.
//   gohttp URL keep N GAP_MS: N GETs GAP_MS apart on one kept-alive
//   connection; prints each status, and "reused" for each GET after the
//   first that went on the same connection.
package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"time"
)

// keep: N GETs on one kept-alive connection, GAP_MS apart.
func keep(url string, n int, gap time.Duration) {
	c := &http.Client{Timeout: 10 * time.Second}
	for i := 0; i < n; i++ {
		if i > 0 {
			time.Sleep(gap)
		}
		reused := false
		tr := &httptrace.ClientTrace{GotConn: func(g httptrace.GotConnInfo) { reused = g.Reused }}
		req, _ := http.NewRequest("GET", url, nil)
		r, err := c.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), tr)))
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		if reused {
			fmt.Println(r.StatusCode, "reused")
		} else {
			fmt.Println(r.StatusCode)
		}
	}
}

func main() {
	if len(os.Args) == 5 && os.Args[2] == "keep" {
		n, _ := strconv.Atoi(os.Args[3])
		ms, _ := strconv.Atoi(os.Args[4])
		keep(os.Args[1], n, time.Duration(ms)*time.Millisecond)
		return
	}
	h2 := len(os.Args) > 2 && os.Args[2] == "h2"
	c := &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, ForceAttemptHTTP2: h2}}
	r, err := c.Get(os.Args[1])
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if h2 {
		fmt.Println(r.StatusCode, r.Proto)
		return
	}
	fmt.Println(r.StatusCode)
}
