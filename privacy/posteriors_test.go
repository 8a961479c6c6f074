package privacy_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

func TestPosteriorsRoundTrip(t *testing.T) {
	p := privacytest.RandomPosteriors(rand.New(rand.NewPCG(1, 2)), 3, 4, 5, 0.4)
	p.AttentionMask = []uint8{1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1}
	p.PriorVar[2] = 2
	p.Metadata["task"] = "sst2"
	path := filepath.Join(t.TempDir(), "p.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	q, err := privacy.ReadPosteriors(path)
	if err != nil {
		t.Fatal(err)
	}
	if q.M != 3 || q.N != 4 || q.P != 5 || !slices.Equal(q.Mu, p.Mu) || !slices.Equal(q.Logvar, p.Logvar) ||
		!slices.Equal(q.Alpha, p.Alpha) || !slices.Equal(q.AttentionMask, p.AttentionMask) || !slices.Equal(q.PriorVar, p.PriorVar) ||
		!slices.Equal(q.PriorMu, p.PriorMu) || q.Metadata["task"] != "sst2" {
		t.Errorf("round trip mismatch: %+v", q)
	}
	if q.Metadata["prior_mu"] != "0" || !strings.HasPrefix(q.Metadata["prior_var"], "[1,1,2") {
		t.Errorf("prior metadata %q %q", q.Metadata["prior_mu"], q.Metadata["prior_var"])
	}
}

// The synthetic file of /work/shared/bench/make_synth.py: written by numpy.
func TestReadPythonPosteriors(t *testing.T) {
	p, err := privacy.ReadPosteriors("testdata/synth_4x3x2.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if p.M != 4 || p.N != 3 || p.P != 2 || p.PriorVar[0] != 1 || p.Alpha[0] != 1 || p.Logvar[0] != 0 {
		t.Errorf("synth file: M=%d N=%d P=%d prior_var %v alpha0 %v", p.M, p.N, p.P, p.PriorVar, p.Alpha[0])
	}
}

// TestPosteriorFileErrors: every bad file is an error naming the file and
// the tensor or metadata key; the good ones read.
func TestPosteriorFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range privacytest.FileCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.Name, " ", "_")+".safetensors")
			if err := os.WriteFile(path, c.Data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := privacy.ReadPosteriors(path)
			switch {
			case c.Want == "" && err != nil:
				t.Fatalf("good file rejected: %v", err)
			case c.Want != "" && (err == nil || !strings.Contains(err.Error(), c.Want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("error %v; want one naming %s and containing %q", err, path, c.Want)
			}
		})
	}
}
