package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestUnknownSubcommands: every command group refuses an unknown
// subcommand with an error naming it (they printed their help and exited
// 0), serve's groups included, and a command an argument it does not take
// (noArgsByDefault); a group alone still prints its help.
func TestUnknownSubcommands(t *testing.T) {
	refuseUnknownSubcommands(rootCmd)
	defer rootCmd.SetArgs(nil)
	for _, args := range [][]string{
		{"attack", "frob"},
		{"serve", "keys", "frobnicate"},
		{"serve", "ledger", "frob"},
		{"serve", "frob"},
		{"audit", "frob"},
		{"sweep", "frob"},
		{"completion", "frob"},
		{"frob"},
		{"certify", "frob"},
		{"serve", "keys", "add", "frob"},
		{"sweep", "stage", "frob"},
	} {
		_, err := runCmd(rootCmd, args...)
		want := fmt.Sprintf("unknown command %q for %q", args[len(args)-1], strings.Join(append([]string{"nvdp"}, args[:len(args)-1]...), " "))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("nvdp %s: err = %v, want %q", strings.Join(args, " "), err, want)
		}
	}
	for _, args := range [][]string{{"attack"}, {"serve", "keys"}} {
		out, err := runCmd(rootCmd, args...)
		if err != nil || !strings.Contains(out, "Available Commands:") {
			t.Errorf("nvdp %s: err = %v, want the group's help:\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestLogFormat: --log-format, a flag of every command, refuses what is neither text nor json
// before the command runs, and json makes the log JSON lines on the command's stderr.
func TestLogFormat(t *testing.T) {
	prev := slog.Default()
	prevLevel := logLevel // root's flags keep the values of earlier tests' command lines
	defer func() { logFormat, logLevel = "text", prevLevel; slog.SetDefault(prev); rootCmd.SetArgs(nil) }()
	keys := filepath.Join(t.TempDir(), "keys.txt")
	_, err := runCmd(rootCmd, "serve", "keygen", "--keys", keys, "--id", "a", "--log-format", "xml")
	if want := `--log-format "xml": want text or json`; err == nil || err.Error() != want {
		t.Errorf("--log-format xml: err = %v, want %q", err, want)
	}
	if _, err := os.Stat(keys); err == nil {
		t.Error("--log-format xml: the keys file was written")
	}
	out, err := runCmd(rootCmd, "serve", "keygen", "--keys", keys, "--id", "a", "--log-format", "json", "--log-level", "info")
	var line struct{ Level, Msg, ID string }
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if err != nil || line.Level != "INFO" || line.Msg != "key added" || line.ID != "a" {
		t.Errorf("--log-format json: err = %v, no JSON log line of the key added in:\n%s", err, out)
	}
}

// TestInterruptedHelper is the process TestInterrupted signals (it runs
// only with NVDP_INTERRUPT_HELPER set to a command of interruptRoot).
func TestInterruptedHelper(t *testing.T) {
	name := os.Getenv("NVDP_INTERRUPT_HELPER")
	if name == "" {
		t.Skip("helper process of TestInterrupted")
	}
	root := &cobra.Command{Use: "nvdp", SilenceErrors: true, SilenceUsage: true}
	ready := func() { fmt.Println("ready") }
	root.AddCommand(
		// a command that looks at no context (certify, report, eval's loading)
		&cobra.Command{Use: "ignore", RunE: func(cmd *cobra.Command, _ []string) error {
			ready()
			time.Sleep(30 * time.Second)
			return nil
		}},
		// one that stops when its context is cancelled (audit)
		&cobra.Command{Use: "honour", RunE: func(cmd *cobra.Command, _ []string) error {
			ready()
			<-cmd.Context().Done()
			return fmt.Errorf("audit: %w", cmd.Context().Err())
		}},
		// one whose error says it was interrupted (training's)
		&cobra.Command{Use: "says", RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd, "writing a checkpoint")
			defer cancel()
			ready()
			<-ctx.Done()
			return fmt.Errorf("interrupted after step 3 (%v)", context.Cause(ctx))
		}},
		// one that stops gracefully, for longer than the grace (training's checkpoint)
		&cobra.Command{Use: "graceful", RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signalContext(cmd, "writing a checkpoint")
			defer cancel()
			ready()
			<-ctx.Done()
			time.Sleep(interruptGrace + time.Second)
			return errors.New("stopped after the checkpoint")
		}},
	)
	root.SetArgs([]string{name})
	os.Exit(execute(root, os.Stderr))
}

// TestInterrupted: SIGTERM and SIGINT cancel the command's context; the
// CLI says it was interrupted and exits 1: a command that ignores its
// context within interruptGrace, one that returns its context's error with
// that error, one that stops gracefully when it has stopped (they died
// without a word: audit, eval).
func TestInterrupted(t *testing.T) {
	for _, tc := range []struct {
		cmd, want string
		max       time.Duration
	}{
		{"ignore", "stopped at once", interruptGrace + 5*time.Second},
		{"honour", "audit: context canceled", 5 * time.Second},
		{"graceful", "stopped after the checkpoint", interruptGrace + 8*time.Second},
		{"says", "", 5 * time.Second},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			t.Run(tc.cmd+" "+sig.String(), func(t *testing.T) {
				c := exec.Command(os.Args[0], "-test.run=^TestInterruptedHelper$")
				c.Env = append(os.Environ(), "NVDP_INTERRUPT_HELPER="+tc.cmd)
				stdout, err := c.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				var stderr strings.Builder
				c.Stderr = &stderr
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				defer c.Process.Kill()
				s := bufio.NewScanner(stdout)
				for s.Scan() && s.Text() != "ready" {
				}
				start := time.Now()
				if err := c.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				err = c.Wait()
				var exit *exec.ExitError
				if !errors.As(err, &exit) || exit.ExitCode() != 1 {
					t.Errorf("%v, want exit status 1", err)
				}
				want := "nvdp: interrupted (" + sig.String() + " signal received): " + tc.want
				if tc.want == "" { // said once
					want = "nvdp: interrupted after step 3 (" + sig.String() + " signal received)\n"
				}
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr %q, want %q", stderr.String(), want)
				}
				if d := time.Since(start); d > tc.max {
					t.Errorf("ended %v after the signal, want within %v", d, tc.max)
				}
			})
		}
	}
}
