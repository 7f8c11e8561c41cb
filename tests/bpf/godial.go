// godial.go - a Go client for the kernel-side backend's tests, built with
// CGO_ENABLED=0 (static) and with cgo by bpf.sh. One line per attempt:
//   tcp ADDR TIMEOUT_MS N: dials N times, 200 ms apart, and prints the
//     error (or "ok" and the peer Go's RemoteAddr reports) and the time;
//   get ADDR TIMEOUT_MS N: dials, sends an HTTP/1.0 GET and reads the
//     answer with that timeout; prints the error or "ok", the peer Go's
//     RemoteAddr reports and the bytes read;
//   udp ADDR TIMEOUT_MS N: sends "ping" and waits for an answer, N times.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
)

func tcp(addr string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "error " + err.Error()
	}
	defer c.Close()
	return "ok " + c.RemoteAddr().String()
}

func get(addr string, timeout time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return "error " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		return "error " + err.Error()
	}
	n, err := io.ReadFull(c, make([]byte, 12))
	if err != nil {
		return fmt.Sprintf("error %s (peer %s, %d bytes)", err, c.RemoteAddr(), n)
	}
	return fmt.Sprintf("ok %s %d bytes", c.RemoteAddr(), n)
}

func udp(addr string, timeout time.Duration) string {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "error " + err.Error()
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return "error " + err.Error()
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return "error " + err.Error()
	}
	return "ok " + string(buf[:n])
}

func main() {
	ms, _ := strconv.Atoi(os.Args[3])
	n, _ := strconv.Atoi(os.Args[4])
	for i := 0; i < n; i++ {
		t0 := time.Now()
		var r string
		if os.Args[1] == "tcp" {
			r = tcp(os.Args[2], time.Duration(ms)*time.Millisecond)
		} else if os.Args[1] == "get" {
			r = get(os.Args[2], time.Duration(ms)*time.Millisecond)
		} else {
			r = udp(os.Args[2], time.Duration(ms)*time.Millisecond)
		}
		fmt.Printf("%s (%d ms)\n", r, time.Since(t0).Milliseconds())
		if i+1 < n {
			time.Sleep(200 * time.Millisecond)
		}
	}
}
