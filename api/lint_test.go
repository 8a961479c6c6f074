package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// redoclyVersion is the @redocly/cli version redocly.yaml was written for.
const redoclyVersion = "2.77.0"

// redocly finds Redocly's CLI without downloading it: the binary $REDOCLY
// names, else an installed @redocly/cli through `npx --no-install` (which
// refuses to download). It skips the test with one line where neither runs.
func redocly(t *testing.T) []string {
	t.Helper()
	const how = "Redocly CLI not installed: npm install -g @redocly/cli@" + redoclyVersion + ", or REDOCLY=path/to/node_modules/.bin/redocly"
	var cmd []string
	if bin := os.Getenv("REDOCLY"); bin != "" {
		cmd = []string{bin}
	} else {
		if _, err := exec.LookPath("node"); err != nil {
			t.Skip(how)
		}
		if _, err := exec.LookPath("npx"); err != nil {
			t.Skip(how)
		}
		cmd = []string{"npx", "--no-install", "@redocly/cli"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, cmd[0], append(cmd[1:], "--version")...).Output()
	if err != nil {
		if os.Getenv("REDOCLY") != "" {
			t.Fatalf("REDOCLY=%s --version: %v", cmd[0], err)
		}
		t.Skip(how)
	}
	if v := strings.TrimSpace(string(out)); v != redoclyVersion {
		t.Logf("Redocly CLI %s (redocly.yaml was written for %s)", v, redoclyVersion)
	}
	return cmd
}

// lintResult is what `redocly lint --format json` reports.
type lintResult struct {
	Totals struct {
		Errors   int `json:"errors"`
		Warnings int `json:"warnings"`
		Ignored  int `json:"ignored"`
	} `json:"totals"`
	Problems []struct {
		RuleID   string `json:"ruleId"`
		Severity string `json:"severity"`
		Message  string `json:"message"`
		Location []struct {
			Pointer string `json:"pointer"`
		} `json:"location"`
	} `json:"problems"`
}

// lint runs the CLI on dir/openapi.yaml with dir/redocly.yaml (and the
// ignore file beside it).
func lint(t *testing.T, cli []string, dir string) lintResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(slices.Clone(cli[1:]), "lint", "--config", filepath.Join(dir, "redocly.yaml"), "--format", "json", filepath.Join(dir, "openapi.yaml"))
	cmd := exec.CommandContext(ctx, cli[0], args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run() // exit status 1 with errors: the JSON says which
	var res lintResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("redocly lint: %v (run: %v)\nstdout: %.2000s\nstderr: %.2000s", err, runErr, stdout.Bytes(), stderr.Bytes())
	}
	return res
}

// TestRedoclyLint lints openapi.yaml with Redocly's recommended rules and
// the committed exceptions (redocly.yaml): no
// error, no warning. The other cases break the document in a copy and
// check the lint reports just that (so a clean lint is not a lint that
// checked nothing).
func TestRedoclyLint(t *testing.T) {
	cli := redocly(t)
	config, err := os.ReadFile("redocly.yaml")
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			if n := bytes.Count(OpenAPI, []byte(old)); n != 1 {
				t.Fatalf("%q occurs %d times in openapi.yaml", old, n)
			}
			return bytes.Replace(OpenAPI, []byte(old), []byte(new), 1)
		}
	}
	for _, tc := range []struct {
		name     string
		doc      func(t *testing.T) []byte
		errors   int
		warnings int
		problems []string // "severity rule pointer", sorted
	}{
		{name: "committed", doc: func(*testing.T) []byte { return OpenAPI }},
		{
			name: "healthz without security",
			doc: replace("operationId: healthz\n      summary: \"Liveness: 200 while the process runs (also while its ledger is unavailable).\"\n      security: []  # public on purpose: no key needed\n",
				"operationId: healthz\n      summary: \"Liveness: 200 while the process runs (also while its ledger is unavailable).\"\n"),
			errors:   1,
			problems: []string{"error security-defined #/paths/~1healthz/get"},
		},
		{
			name:     "openapi.yaml response without info",
			doc:      replace("                  info:\n                    type: object\n                    required: [title, version]\n                    properties:\n                      title: {type: string}\n                      version: {type: string}\n", ""),
			warnings: 1,
			problems: []string{"warn no-required-schema-properties-undefined #/paths/~1v1~1openapi.yaml/get/responses/200/content/application~1yaml/schema/required/1"},
		},
		{
			name:     "a tag without description",
			doc:      replace("  - name: operation\n    description:", "  - name: operation\n    x-description:"),
			warnings: 1,
			problems: []string{"warn tag-description #/tags/1/description"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range map[string][]byte{"openapi.yaml": tc.doc(t), "redocly.yaml": config} {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res := lint(t, cli, dir)
			var got []string
			for _, p := range res.Problems {
				ptr := ""
				if len(p.Location) > 0 {
					ptr = p.Location[0].Pointer
				}
				got = append(got, fmt.Sprintf("%s %s %s", p.Severity, p.RuleID, ptr))
			}
			slices.Sort(got)
			if res.Totals.Errors != tc.errors || res.Totals.Warnings != tc.warnings || !slices.Equal(got, tc.problems) {
				t.Errorf("lint: %d errors, %d warnings %q; want %d, %d %q", res.Totals.Errors, res.Totals.Warnings, got, tc.errors, tc.warnings, tc.problems)
				for _, p := range res.Problems {
					t.Logf("%s %s: %s", p.Severity, p.RuleID, p.Message)
				}
			}
			if res.Totals.Ignored != 0 { // no ignore file: every exception is a rule in redocly.yaml
				t.Errorf("lint: %d problems ignored, want 0", res.Totals.Ignored)
			}
		})
	}
}
