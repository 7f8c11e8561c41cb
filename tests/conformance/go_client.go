// go_client.go - the conformance suite's Go client: one GET of argv[1] with
// net/http, dial timeout 2 s and response-header timeout 2 s, the body read
// whole. Prints "RESULT <outcome> <ms>", the outcome named from Go's own
// error. Built with CGO_ENABLED=0 (static) and with cgo by the suite, and
// run under the kernel-side backend, which is how faultnet reaches Go.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"
)

func name(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "ECONNREFUSED"
	case errors.Is(err, syscall.ECONNRESET):
		return "ECONNRESET"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "EOF"
	case strings.Contains(err.Error(), "dial tcp") && errors.As(err, &ne) && ne.Timeout():
		return "dial-timeout"
	case errors.As(err, &ne) && ne.Timeout():
		return "read-timeout"
	}
	return "error:" + strings.ReplaceAll(err.Error(), " ", "_")
}

func main() {
	t0 := time.Now()
	c := &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		ResponseHeaderTimeout: 2 * time.Second,
	}, Timeout: 6 * time.Second}
	out := "ok"
	r, err := c.Get(os.Args[1])
	if err == nil {
		_, err = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	if err != nil {
		out = name(err)
	}
	fmt.Printf("RESULT %s %d\n", out, time.Since(t0).Milliseconds())
}
