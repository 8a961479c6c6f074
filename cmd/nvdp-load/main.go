// Command nvdp-load is the load generator of `nvdp serve`
// (docs/performance.md, "Release service"): for each concurrency level it
// drives POST /v1/embed for a fixed duration or request count and reports
// throughput, p50/p90/p99 latency, errors by kind, the releases received
// and the server's resident memory. The API key is read from the
// environment variable NVDP_API_KEY (never a flag: it would show in the
// process list). Send traffic only to a server of your own.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nvdp-project/nvdp/internal/loadgen"
	"github.com/spf13/cobra"
)

func main() {
	if err := command().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "nvdp-load:", err)
		os.Exit(1)
	}
}

func command() *cobra.Command {
	var (
		c           loadgen.Config
		levels      string
		textsPath   string
		jsonOut     bool
		maxErrorsOK int
	)
	cmd := &cobra.Command{
		Use:           "nvdp-load --url http://127.0.0.1:8080 --concurrency 1,8,32 --duration 20s",
		Short:         "Load generator of nvdp serve: throughput, latency percentiles, errors by kind, releases received",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns, err := parseLevels(levels)
			if err != nil {
				return err
			}
			c.Texts = loadgen.SyntheticTexts(1000)
			if textsPath != "" {
				var err error
				if c.Texts, err = loadgen.ReadTexts(textsPath); err != nil {
					return err
				}
			}
			if urls := strings.Split(c.URL, ","); len(urls) > 1 {
				c.URL, c.URLs = "", urls
			}
			c.Key = os.Getenv("NVDP_API_KEY")
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var results []loadgen.Result
			for _, n := range ns {
				c.Concurrency = n
				if err := c.Validate(); err != nil {
					return err
				}
				r, err := loadgen.Run(ctx, c)
				if err != nil {
					return err
				}
				results = append(results, r)
				if ctx.Err() != nil {
					break
				}
			}
			if jsonOut {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(results); err != nil {
					return err
				}
			} else {
				printTable(cmd, results)
			}
			for _, r := range results {
				if e := r.ErrorCount(); e > maxErrorsOK {
					return fmt.Errorf("%d failed requests at concurrency %d (--max-errors %d)", e, r.Concurrency, maxErrorsOK)
				}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&c.URL, "url", "http://127.0.0.1:8080", "base URL of the nvdp serve instance (yours: loopback or your own test host); comma-separated URLs of replicas: client i sends to the i-th mod their count")
	fs.StringVar(&levels, "concurrency", "1,8,32", "comma-separated concurrent clients, one run each")
	fs.DurationVar(&c.Duration, "duration", 20*time.Second, "length of each run (0: --requests only)")
	fs.IntVar(&c.Requests, "requests", 0, "requests of each run in all (0: --duration only)")
	fs.StringVar(&textsPath, "texts", "", "file of texts, one per line (default: 1000 synthetic sentences)")
	fs.IntVar(&c.TextsPerRequest, "texts-per-request", 1, "texts in each request (each one release)")
	fs.DurationVar(&c.Timeout, "timeout", 60*time.Second, "timeout of each request")
	fs.BoolVar(&c.Binary, "binary", false, "ask for the safetensors response (Accept: application/vnd.safetensors) instead of JSON")
	fs.BoolVar(&jsonOut, "json", false, "print the results as JSON")
	fs.IntVar(&maxErrorsOK, "max-errors", 0, "exit non-zero when a run has more failed requests than this")
	return cmd
}

// parseLevels reads --concurrency: comma-separated counts >= 1.
func parseLevels(levels string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--concurrency: %q is not a count >= 1", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

func printTable(cmd *cobra.Command, results []loadgen.Result) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "clients\trequests\tok\treleases\treq/s\treleases/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\tserver RSS MiB\terrors")
	for _, r := range results {
		var errs []string
		for k, v := range r.Errors {
			errs = append(errs, fmt.Sprintf("%s: %d", k, v))
		}
		sort.Strings(errs)
		e := strings.Join(errs, ", ")
		if e == "" {
			e = "none"
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f\t%s\n", r.Concurrency, r.Requests, r.OK, r.Releases,
			r.Throughput, r.ReleasesPerS, r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max, r.ServerRSSBytes/(1<<20), e)
	}
	w.Flush()
}
