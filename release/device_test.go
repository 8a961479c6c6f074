package release

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/nvdp-project/nvdp/cuda"
	"github.com/nvdp-project/nvdp/internal/cudaemu"
	"github.com/nvdp-project/nvdp/nvib"
)

// tolDeviceMu is the device posterior's mean against the CPU's, relative
// (max |device - cpu| / max |cpu|): the whole NVDP model twin's tolerance
// (dnn's tolNVDPModel, whose posterior export test, testNVDPModelTwin,
// compares mu, logvar and alpha with it). In lattice steps it allows
// |m_device - m_cpu| <= ceil(tolDeviceMu max|mu| / G) + 1: the means'
// difference over G, plus one for the rounding toward the centre that can
// fall on either side of a lattice point.
const tolDeviceMu = 1e-4

// posteriorsOf collects the clipped posteriors r computes for texts, batch
// by batch, as the release uses them.
func posteriorsOf(t *testing.T, r *Releaser, texts []string) []*nvib.Posterior {
	t.Helper()
	var out []*nvib.Posterior
	if err := r.posteriors(context.Background(), texts, false, func(post *nvib.Posterior, lo, hi int) error {
		for i := range hi - lo {
			out = append(out, example(post, i))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A releaser with Options.Device computes the posteriors on the device
// (here the CUDA stand-in) and releases them with the host's exact sampler:
// the device posterior has the model's fixed noise bit for bit (every
// logvar and alpha, the exact release's check), its means are the CPU's
// within tolDeviceMu, and its release of the same texts from the same
// seeded source is the CPU's: the lattice values z/G equal wherever the
// two means are equal, within the tolerance in lattice steps where they
// differ, the Dirichlet weights bit for bit. The model description says
// where the posteriors were computed; after Close the releaser refuses.
func TestDeviceRelease(t *testing.T) {
	dev := cudaemu.OpenDevice(t)
	ctx := context.Background()
	for _, variant := range []string{nvib.ModelNVDPClipped, nvib.ModelGaussian} {
		t.Run(variant, func(t *testing.T) {
			dir := tinyModel(t, variant)
			rc, err := Load(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rd, err := Load(dir, Options{Device: dev})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			if got, want := rd.Model().Device, dev.Backend(); got != want || !rd.Exact() {
				t.Errorf("device releaser: device %q exact %v, want %q, exact", got, rd.Exact(), want)
			}
			if got := rc.Model().Device; got != cuda.DeviceCPU {
				t.Errorf("CPU releaser: device %q, want %q", got, cuda.DeviceCPU)
			}
			lat, lv, _, err := rd.ClipSet().ReleaseLattice()
			if err != nil {
				t.Fatal(err)
			}
			G := lat.G()
			N, P := rd.Shape()

			before := dev.Counts()
			pd := posteriorsOf(t, rd, texts)
			if c := dev.Counts().Sub(before); c.Launches == 0 || c.Downloads == 0 {
				t.Errorf("the device posteriors launched %d kernels and downloaded %d times: not computed on the device", c.Launches, c.Downloads)
			}
			pc := posteriorsOf(t, rc, texts)
			if len(pd) != len(texts) || len(pc) != len(texts) {
				t.Fatalf("%d device and %d CPU posteriors of %d texts", len(pd), len(pc), len(texts))
			}
			maxMu, diffMu := 0.0, 0.0
			for k := range texts {
				d, c := pd[k], pc[k]
				if d.N != N || d.P != P || !slices.Equal(d.Mask, c.Mask) || d.PadsReleased != c.PadsReleased {
					t.Fatalf("text %d: device posterior %d x %d mask %v pads %v, CPU %d x %d %v %v", k, d.N, d.P, d.Mask, d.PadsReleased, c.N, c.P, c.Mask, c.PadsReleased)
				}
				for q, v := range d.Logvar.Data {
					if v != lv || math.Float32bits(v) != math.Float32bits(c.Logvar.Data[q]) {
						t.Fatalf("text %d value %d: device logvar %v (CPU %v), the fixed noise is %v", k, q, v, c.Logvar.Data[q], lv)
					}
				}
				for i, a := range d.Alpha.Data {
					if a != rd.exact.alpha[i] || math.Float32bits(a) != math.Float32bits(c.Alpha.Data[i]) {
						t.Fatalf("text %d component %d: device alpha %v (CPU %v), the fixed pseudo-count is %v", k, i, a, c.Alpha.Data[i], rd.exact.alpha[i])
					}
				}
				for q, v := range c.Mu.Data {
					maxMu = max(maxMu, math.Abs(float64(v)))
					diffMu = max(diffMu, math.Abs(float64(d.Mu.Data[q])-float64(v)))
				}
			}
			if !(diffMu <= tolDeviceMu*maxMu) || maxMu == 0 {
				t.Fatalf("device means differ from the CPU's by %g (max |mu| %g): relative %g, tolerance %g", diffMu, maxMu, diffMu/maxMu, tolDeviceMu)
			}
			steps := math.Ceil(tolDeviceMu*maxMu/G) + 1
			t.Logf("%s: device means within %.3g of the CPU's (relative %.3g); tolerance %g lattice steps of G = 2^%d", variant, diffMu, diffMu/maxMu, steps, lat.Exp)

			got, err := rd.Release(ctx, texts, NewSeededSource(7))
			if err != nil {
				t.Fatal(err)
			}
			want, err := rc.Release(ctx, texts, NewSeededSource(7))
			if err != nil {
				t.Fatal(err)
			}
			differ, maxSteps := 0, 0.0
			for k := range texts {
				for q, z := range got[k].Z {
					dz := math.Abs(float64(z)/G - float64(want[k].Z[q])/G)
					if dz != math.Trunc(dz) {
						t.Fatalf("text %d value %d: z %v and %v are not both on the lattice", k, q, z, want[k].Z[q])
					}
					same := pd[k].Mu.Data[q] == pc[k].Mu.Data[q]
					if same && dz != 0 || dz > steps {
						t.Fatalf("text %d value %d: device z %v, CPU %v (%g lattice steps; means %v and %v, tolerance %g steps where they differ, 0 where equal)",
							k, q, z, want[k].Z[q], dz, pd[k].Mu.Data[q], pc[k].Mu.Data[q], steps)
					}
					if dz != 0 {
						differ++
						maxSteps = max(maxSteps, dz)
					}
				}
				if !slices.Equal(got[k].Pi, want[k].Pi) {
					t.Errorf("text %d: device pi %v, CPU %v", k, got[k].Pi, want[k].Pi)
				}
			}
			t.Logf("%s: %d of %d released values differ between device and CPU, by at most %g lattice steps", variant, differ, len(texts)*N*P, maxSteps)

			if err := rd.Close(); err != nil {
				t.Fatal(err)
			}
			if err := rd.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if out, err := rd.Release(ctx, texts[:1], NewSeededSource(7)); !errors.Is(err, errClosed) || out != nil {
				t.Errorf("release after Close: %v, %v; want errClosed", len(out), err)
			}
			if err := rc.Close(); err != nil {
				t.Errorf("CPU Close: %v", err)
			}
			if out, err := rc.Release(ctx, texts[:1], NewSeededSource(7)); err != nil || !slices.Equal(out[0].Z, want[0].Z) {
				t.Errorf("CPU release after Close (a no-op): %v", err)
			}
		})
	}
}
