package privacy

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/safetensors"
)

func TestPosteriorsRoundTrip(t *testing.T) {
	p := randomPosteriors(rand.New(rand.NewPCG(1, 2)), 3, 4, 5, 0.4)
	p.AttentionMask = []uint8{1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1}
	p.PriorVar[2] = 2
	p.Metadata["task"] = "sst2"
	path := filepath.Join(t.TempDir(), "p.safetensors")
	if err := WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	q, err := ReadPosteriors(path)
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
	p, err := ReadPosteriors("testdata/synth_4x3x2.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if p.M != 4 || p.N != 3 || p.P != 2 || p.PriorVar[0] != 1 || p.Alpha[0] != 1 || p.Logvar[0] != 0 {
		t.Errorf("synth file: M=%d N=%d P=%d prior_var %v alpha0 %v", p.M, p.N, p.P, p.PriorVar, p.Alpha[0])
	}
}

func TestPosteriorFileErrors(t *testing.T) {
	dir := t.TempDir()
	good := NewPosteriors(2, 3, 4)
	for i := range good.Alpha {
		good.Alpha[i] = 0.5
	}
	write := func(name string, ts []*safetensors.Tensor, md map[string]string) string {
		path := filepath.Join(dir, name+".safetensors")
		if err := safetensors.WriteFile(path, ts, md); err != nil {
			t.Fatal(err)
		}
		return path
	}
	std := func(mu, lv, al []float32, muShape, lvShape, alShape []int) []*safetensors.Tensor {
		return []*safetensors.Tensor{
			safetensors.FromFloat32("mu", muShape, mu),
			safetensors.FromFloat32("logvar", lvShape, lv),
			safetensors.FromFloat32("alpha", alShape, al),
		}
	}
	md := map[string]string{"prior_mu": "0", "prior_var": "1"}
	nan := slices.Clone(good.Mu)
	nan[7] = float32(math.NaN())
	negA := slices.Clone(good.Alpha)
	negA[4] = -0.1
	infLV := slices.Clone(good.Logvar)
	infLV[0] = float32(math.Inf(1))
	s3, s34 := []int{2, 3, 4}, []int{2, 3}
	okPath := write("ok", std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34), md)
	raw, _ := os.ReadFile(okPath)
	trunc := filepath.Join(dir, "trunc.safetensors")
	os.WriteFile(trunc, raw[:len(raw)-3], 0o644)

	cases := []struct {
		name, path, want string
	}{
		{"truncated", trunc, "truncated"},
		{"nan", write("nan", std(nan, good.Logvar, good.Alpha, s3, s3, s34), md), "tensor mu: non-finite value NaN at [example 0, component 1, dim 3]"},
		{"inf logvar", write("inf", std(good.Mu, infLV, good.Alpha, s3, s3, s34), md), "tensor logvar: non-finite"},
		{"negative alpha", write("neg", std(good.Mu, good.Logvar, negA, s3, s3, s34), md), "tensor alpha: negative pseudo-count -0.1 at [example 1, component 1]"},
		{"shape mismatch", write("shape", std(good.Mu, good.Logvar, good.Alpha[:4], s3, s3, []int{2, 2}), md), "tensor alpha: shape [2 2]"},
		{"logvar shape", write("lvshape", std(good.Mu, good.Logvar, good.Alpha, s3, []int{2, 4, 3}, s34), md), "tensor logvar: shape [2 4 3]"},
		{"missing alpha", write("noalpha", std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34)[:2], md), "tensor alpha missing"},
		{"missing prior", write("noprior", std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34), map[string]string{"prior_mu": "0"}), "metadata prior_var missing"},
		{"prior length", write("priorlen", std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34), map[string]string{"prior_mu": "[0,0]", "prior_var": "1"}), "prior_mu: 2 values, want P = 4"},
		{"prior var 0", write("priorvar", std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34), map[string]string{"prior_mu": "0", "prior_var": "0"}), "prior_var 0"},
		{"mask shape", write("mask", append(std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34), safetensors.FromUint8("attention_mask", []int{3}, []uint8{1, 1, 1})), md), "tensor attention_mask: shape [3]"},
		{"mask value", write("maskv", append(std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34), safetensors.FromUint8("attention_mask", s34, []uint8{1, 2, 1, 1, 1, 1})), md), "tensor attention_mask: value 2"},
		// the prior component is always real: a 0 there is a mask of the other convention
		{"mask prior padded", write("maskp", append(std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34), safetensors.FromUint8("attention_mask", s34, []uint8{1, 1, 0, 0, 1, 1})), md), "tensor attention_mask: the prior component is marked padding at [example 1, component 0]"},
		// files of the old convention (tensor "mask", 1 = padding) are refused, never misread
		{"old mask convention", write("oldmask", append(std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34), safetensors.FromUint8("mask", s34, []uint8{0, 0, 1, 0, 0, 0})), md), "tensor mask: the file uses the old mask convention (1 = padding component)"},
		{"f64 mu", write("f64", []*safetensors.Tensor{safetensors.FromFloat64("mu", s3, make([]float64, 24))}, md), "tensor mu: dtype F64, want F32"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadPosteriors(c.path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
				t.Fatalf("error %v; want one naming %s and containing %q", err, c.path, c.want)
			}
		})
	}
	if _, err := ReadPosteriors(okPath); err != nil {
		t.Fatalf("good file rejected: %v", err)
	}
}
