package privacy

import (
	"bytes"
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

// posteriorCase is a posterior file in memory and the error it must give
// ("" for a good file).
type posteriorCase struct {
	name string
	data []byte
	want string
}

// posteriorCases are the bad posterior files of TestPosteriorFileErrors
// (and the seeds of FuzzParsePosteriors), then good ones.
func posteriorCases(tb testing.TB) []posteriorCase {
	good := NewPosteriors(2, 3, 4)
	for i := range good.Alpha {
		good.Alpha[i] = 0.5
	}
	file := func(ts []*safetensors.Tensor, md map[string]string) []byte {
		var b bytes.Buffer
		if err := safetensors.Write(&b, ts, md); err != nil {
			tb.Fatal(err)
		}
		return b.Bytes()
	}
	std := func(mu, lv, al []float32, muShape, lvShape, alShape []int) []*safetensors.Tensor {
		return []*safetensors.Tensor{
			safetensors.FromFloat32("mu", muShape, mu),
			safetensors.FromFloat32("logvar", lvShape, lv),
			safetensors.FromFloat32("alpha", alShape, al),
		}
	}
	with := func(v []float32, k int, x float32) []float32 {
		v = slices.Clone(v)
		v[k] = x
		return v
	}
	md := map[string]string{"prior_mu": "0", "prior_var": "1"}
	s3, s34 := []int{2, 3, 4}, []int{2, 3}
	ok := std(good.Mu, good.Logvar, good.Alpha, s3, s3, s34)
	okFile := file(ok, md)
	return []posteriorCase{
		{"truncated", okFile[:len(okFile)-3], "truncated"},
		{"nan", file(std(with(good.Mu, 7, float32(math.NaN())), good.Logvar, good.Alpha, s3, s3, s34), md), "tensor mu: non-finite value NaN at [example 0, component 1, dim 3]"},
		{"inf logvar", file(std(good.Mu, with(good.Logvar, 0, float32(math.Inf(1))), good.Alpha, s3, s3, s34), md), "tensor logvar: non-finite"},
		{"logvar overflows exp", file(std(good.Mu, with(good.Logvar, 13, 1000), good.Alpha, s3, s3, s34), md), "tensor logvar: value 1000 at [example 1, component 0, dim 1]"},
		{"logvar underflows exp", file(std(good.Mu, with(good.Logvar, 13, -800), good.Alpha, s3, s3, s34), md), "tensor logvar: value -800 at [example 1, component 0, dim 1]"},
		{"negative alpha", file(std(good.Mu, good.Logvar, with(good.Alpha, 4, -0.1), s3, s3, s34), md), "tensor alpha: negative pseudo-count -0.1 at [example 1, component 1]"},
		{"shape mismatch", file(std(good.Mu, good.Logvar, good.Alpha[:4], s3, s3, []int{2, 2}), md), "tensor alpha: shape [2 2]"},
		{"logvar shape", file(std(good.Mu, good.Logvar, good.Alpha, s3, []int{2, 4, 3}, s34), md), "tensor logvar: shape [2 4 3]"},
		{"missing alpha", file(ok[:2], md), "tensor alpha missing"},
		{"missing prior", file(ok, map[string]string{"prior_mu": "0"}), "metadata prior_var missing"},
		{"prior length", file(ok, map[string]string{"prior_mu": "[0,0]", "prior_var": "1"}), "prior_mu: 2 values, want P = 4"},
		{"prior var 0", file(ok, map[string]string{"prior_mu": "0", "prior_var": "0"}), "prior_var 0"},
		{"null in prior_mu", file(ok, map[string]string{"prior_mu": "[0, null, 0, 0]", "prior_var": "1"}), "metadata prior_mu: dim 1 is null"},
		{"null in prior_var", file(ok, map[string]string{"prior_mu": "0", "prior_var": "[1, 1, 1, null]"}), "metadata prior_var: dim 3 is null"},
		{"prior not a number", file(ok, map[string]string{"prior_mu": "zero", "prior_var": "1"}), `metadata prior_mu: "zero" is neither`},
		{"mask shape", file(append(slices.Clone(ok), safetensors.FromUint8("attention_mask", []int{3}, []uint8{1, 1, 1})), md), "tensor attention_mask: shape [3]"},
		{"mask value", file(append(slices.Clone(ok), safetensors.FromUint8("attention_mask", s34, []uint8{1, 2, 1, 1, 1, 1})), md), "tensor attention_mask: value 2"},
		// the prior component is always real: a 0 there is a mask of the other convention
		{"mask prior padded", file(append(slices.Clone(ok), safetensors.FromUint8("attention_mask", s34, []uint8{1, 1, 0, 0, 1, 1})), md), "tensor attention_mask: the prior component is marked padding at [example 1, component 0]"},
		// files of the old convention (tensor "mask", 1 = padding) are refused, never misread
		{"old mask convention", file(append(slices.Clone(ok), safetensors.FromUint8("mask", s34, []uint8{0, 0, 1, 0, 0, 0})), md), "tensor mask: the file uses the old mask convention (1 = padding component)"},
		{"f64 mu", file([]*safetensors.Tensor{safetensors.FromFloat64("mu", s3, make([]float64, 24))}, md), "tensor mu: dtype F64, want F32"},
		{"empty", nil, "safetensors"},
		{"good", okFile, ""},
		{"good, mu 1e20", file(std(with(good.Mu, 0, 1e20), good.Logvar, good.Alpha, s3, s3, s34), md), ""},
		{"good, mask and prior arrays", file(append(slices.Clone(ok), safetensors.FromUint8("attention_mask", s34, []uint8{1, 0, 0, 1, 1, 0})),
			map[string]string{"prior_mu": "[0, 0.5, 0, -1]", "prior_var": "[1, 2, 1, 0.5]"}), ""},
	}
}

// TestPosteriorFileErrors: every bad file is an error naming the file and
// the tensor or metadata key; the good ones read.
func TestPosteriorFileErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range posteriorCases(t) {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadPosteriors(path)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("good file rejected: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path)):
				t.Fatalf("error %v; want one naming %s and containing %q", err, path, c.want)
			}
		})
	}
}
