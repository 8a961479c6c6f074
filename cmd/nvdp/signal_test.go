package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestSignalContextHelper is the process TestSignalContext signals (it runs
// only with NVDP_SIGNAL_HELPER=1).
func TestSignalContextHelper(t *testing.T) {
	if os.Getenv("NVDP_SIGNAL_HELPER") != "1" {
		t.Skip("helper process of TestSignalContext")
	}
	ctx, cancel := signalContext(&cobra.Command{}, stopTraining)
	defer cancel()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("cancelled:", context.Cause(ctx), errors.Is(ctx.Err(), context.Canceled))
	time.Sleep(20 * time.Second) // the second signal ends the process before
	fmt.Println("survived the second signal")
}

// TestSignalContext: SIGTERM and SIGINT cancel the context of a long
// command (training then writes its final checkpoint) with the signal as the
// cause, instead of killing the process; a second signal ends it at once.
func TestSignalContext(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			c := exec.Command(os.Args[0], "-test.run=^TestSignalContextHelper$", "-test.v")
			c.Env = append(os.Environ(), "NVDP_SIGNAL_HELPER=1")
			stdout, err := c.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr, err := c.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			defer c.Process.Kill()
			out, logs := bufio.NewScanner(stdout), bufio.NewScanner(stderr)
			next := func(s *bufio.Scanner, want string) string {
				for s.Scan() {
					if strings.Contains(s.Text(), want) {
						return s.Text()
					}
				}
				t.Fatalf("no line with %q (%v)", want, s.Err())
				return ""
			}
			next(out, "ready")
			start := time.Now()
			if err := c.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if line := next(out, "cancelled:"); !strings.Contains(line, sig.String()+" signal received true") {
				t.Errorf("helper: %q, want the signal as the cause and context.Canceled", line)
			}
			next(logs, "stopping") // logged once the signals are let go
			if err := c.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err = c.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != sig {
				t.Fatalf("after the second %v: %v, want the process ended by the signal", sig, err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the second signal took %v to end the process", d)
			}
		})
	}
}
