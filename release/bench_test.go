package release

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/nvdp-project/nvdp/encoder"
	"github.com/nvdp-project/nvdp/model"
	"github.com/nvdp-project/nvdp/nvib"
)

// benchReleaser returns the releaser of an untrained fixed-noise nvdp-clipped model of the main
// job's shape: bert-tiny (hidden 128, 2 layers), max-seq-len 64 (N 65), P 128, on the synthetic
// task.
func benchReleaser(b *testing.B) *Releaser {
	b.Helper()
	dir := b.TempDir()
	glueDir, vocab, err := synthTask(dir)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := encoder.Preset("bert-tiny")
	if err != nil {
		b.Fatal(err)
	}
	o := model.DefaultOptions()
	p := 128
	o.Task, o.GlueDir, o.Encoder, o.Vocab, o.Variant, o.ScratchConfig = "sst2", glueDir, "scratch:bert-tiny", vocab, nvib.ModelNVDPClipped, &enc
	o.MaxSeqLen, o.LatentDim, o.Seed, o.EvalBatchSize = 64, &p, 1, 32
	o.Out, o.HandSetClipping = filepath.Join(dir, "model"), true
	o.LogvarMargin = math.Log(o.ClipOrder / (o.ClipOrder - 1))
	o.CAlphaMax, o.CAlphaMin = 1.5, 1.5
	o.Resolve()
	c, err := model.Check(o)
	if err != nil {
		b.Fatal(err)
	}
	m, err := model.Build(c, nil)
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(m, Options{})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// benchRelease times Release of one release of each of batch texts, the noise drawn in the call
// from a seeded source (the service's pool draws the same noise on its workers).
func benchRelease(b *testing.B, batch int) {
	r := benchReleaser(b)
	in := make([]string, batch)
	for i := range in {
		in[i] = texts[i%len(texts)]
	}
	src := NewSeededSource(1)
	ctx := context.Background()
	if _, err := r.Release(ctx, in, src); err != nil { // warm-up
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := r.Release(ctx, in, src); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "texts/s")
}

// go test -tags openblas -run '^$' -bench Release -benchmem ./release
func BenchmarkReleaseB1(b *testing.B) { benchRelease(b, 1) }
func BenchmarkReleaseB8(b *testing.B) { benchRelease(b, 8) }
