// gogrpc.go - a Go gRPC client (Debian's grpc-go, built offline from
// /usr/share/gocode with CGO_ENABLED=0) for tests/bpf/http.sh: one unary
// grpc.health.v1.Health/Check to ADDR, plaintext, with a service config
// retrying UNAVAILABLE (maxAttempts 4; GRPC_GO_RETRY=on turns retries on in
// grpc-go 1.33). Prints "OK" or the call's status code and message.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

const retry = `{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health"}],
  "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.05s", "maxBackoff": "0.2s",
    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}`

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, os.Args[1], grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithDefaultServiceConfig(retry))
	if err != nil {
		fmt.Println("error: dial:", err)
		return
	}
	defer conn.Close()
	_, err = grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
	if err != nil {
		s := status.Convert(err)
		fmt.Println(s.Code(), s.Message())
		return
	}
	fmt.Println("OK")
}
