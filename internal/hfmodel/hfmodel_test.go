package hfmodel

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/safetensors"
)

func TestReadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte("7"), 0o644); err != nil {
		t.Fatal(err)
	}
	parse := func(b []byte) (string, error) {
		if string(b) != "7" {
			return "", errors.New("not 7")
		}
		return "seven", nil
	}
	if c, err := ReadConfig(path, parse); err != nil || c != "seven" {
		t.Fatalf("ReadConfig = %q, %v", c, err)
	}
	os.WriteFile(path, []byte("8"), 0o644)
	if _, err := ReadConfig(path, parse); err == nil || !strings.Contains(err.Error(), path+": not 7") {
		t.Errorf("parse error %v, want it to name the file", err)
	}
	if _, err := ReadConfig(filepath.Join(dir, "none.json"), parse); err == nil || !strings.Contains(err.Error(), "none.json") {
		t.Errorf("missing file: %v", err)
	}
}

// TestLoadWeights: names mapped, heads ignored, optional buffers returned,
// unknown tensors outside Strict ignored, inside Strict refused.
func TestLoadWeights(t *testing.T) {
	w, b := nn.NewParam("m.w", 2, 2), nn.NewParam("m.b", 2)
	names := Names{
		Canonical: func(n string) (string, bool) {
			if strings.HasPrefix(n, "head.") {
				return "", false
			}
			return strings.TrimPrefix(n, "pre."), true
		},
		Strict: []string{"m."}, Optional: map[string][]int{"buf": {3}}, Model: "toy model", Kind: "toy",
	}
	write := func(ts ...*safetensors.Tensor) string {
		p := filepath.Join(t.TempDir(), "model.safetensors")
		if err := safetensors.WriteFile(p, ts, nil); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := []*safetensors.Tensor{
		safetensors.FromFloat32("pre.m.w", []int{2, 2}, []float32{1, 2, 3, 4}),
		safetensors.FromFloat32("m.b", []int{2}, []float32{5, 6}),
		safetensors.FromFloat32("head.x", []int{1}, []float32{9}),
		safetensors.FromFloat32("other", []int{1}, []float32{9}),
		safetensors.FromFloat32("buf", []int{3}, []float32{7, 8, 9}),
	}
	opt, err := LoadWeights(write(ok...), []*nn.Param{w, b}, names)
	if err != nil {
		t.Fatal(err)
	}
	if w.Value.Data[3] != 4 || b.Value.Data[1] != 6 || len(opt) != 1 || opt["buf"][2] != 9 {
		t.Errorf("loaded w %v b %v optional %v", w.Value.Data, b.Value.Data, opt)
	}
	bad := append(ok[:4:4], safetensors.FromFloat32("m.c", []int{1}, []float32{0}))
	if _, err := LoadWeights(write(bad...), []*nn.Param{w, b}, names); err == nil || !strings.Contains(err.Error(), `tensor "m.c" is not a parameter of this toy model`) {
		t.Errorf("unknown strict tensor: %v", err)
	}
	if _, err := LoadWeights(write(ok[1]), []*nn.Param{w, b}, names); err == nil || !strings.Contains(err.Error(), "missing toy tensor(s) m.w") {
		t.Errorf("missing tensor: %v", err)
	}
}
