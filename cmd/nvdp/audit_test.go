package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
)

func writeTestPosteriors(t *testing.T) string {
	t.Helper()
	p := privacy.NewPosteriors(5, 3, 4)
	for x := range p.M {
		for i := range p.N {
			p.Alpha[x*p.N+i] = float32(0.3 + 0.1*float64((x+i)%5))
			for j := range p.P {
				k := (x*p.N+i)*p.P + j
				if i > 0 {
					p.Mu[k] = float32(0.1 * float64((x*7+i*3+j)%5-2))
					p.LogVar[k] = float32(2 * math.Log(0.5+0.1*float64((x+j)%4)))
				}
			}
		}
	}
	path := filepath.Join(t.TempDir(), "post.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

func runAuditCmd(args ...string) (string, error) {
	cmd := newAuditCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestAuditCommandJSON(t *testing.T) {
	path := writeTestPosteriors(t)
	out, err := runAuditCmd("--posteriors", path, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"mode", "order", "delta", "examples", "pairs", "invalid_pairs", "rd_max", "rd_mean", "argmax", "bdp_epsilon", "bdp_epsilon_pooled", "bdp_order"} {
		if _, ok := r[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if r["mode"] != "principled" || r["pairs"] != 20.0 || r["examples"] != 5.0 {
		t.Errorf("mode %v pairs %v examples %v", r["mode"], r["pairs"], r["examples"])
	}
	// The CLI reports what the library computes.
	p, _ := privacy.ReadPosteriors(path)
	want, _ := privacy.Audit(context.Background(), p, privacy.Options{})
	if r["rd_max"] != float64(want.RDMax) {
		t.Errorf("rd_max %v, library %v", r["rd_max"], want.RDMax)
	}

	out, err = runAuditCmd("--posteriors", path, "--mode", "reference", "--batch-size", "4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r["mode"] != "reference" || r["rd_max_unfiltered"] == nil {
		t.Errorf("reference JSON: %v %s", err, out)
	}

	out, err = runAuditCmd("--posteriors", path, "--bdp-orders", "0.1,0.5")
	if err != nil || !strings.Contains(out, "RD max") || !strings.Contains(out, "BDP per moment order") {
		t.Errorf("table output: %v\n%s", err, out)
	}
}

func TestAuditCommandErrors(t *testing.T) {
	path := writeTestPosteriors(t)
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	raw, _ := os.ReadFile(path)
	os.WriteFile(bad, raw[:len(raw)-10], 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--posteriors", path, "--order", "1"}, "must be > 1"},
		{[]string{"--posteriors", path, "--order", "0.5"}, "must be > 1"},
		{[]string{"--posteriors", bad}, bad},
		{[]string{"--posteriors", filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"--posteriors", path, "--mode", "fast"}, "principled or reference"},
		{[]string{"--posteriors", path, "--bdp-orders", "0.1,x"}, "not a number"},
		{[]string{"--posteriors", path, "--mode", "reference", "--mask"}, "principled mode only"},
		{[]string{}, "posteriors"},
	}
	for _, c := range cases {
		_, err := runAuditCmd(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

func TestAuditRegistered(t *testing.T) {
	for _, c := range rootCmd.Commands() {
		if c.Name() == "audit" {
			return
		}
	}
	t.Fatal("audit not registered on rootCmd")
}
