package audio

import (
	"math"
	"strings"
	"testing"
)

func moments(x []float32) (mean, variance float64) {
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		variance += (float64(v) - mean) * (float64(v) - mean)
	}
	return mean, variance / float64(len(x))
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    []float32
		want []float32 // nil: check mean 0, variance 1 only
	}{
		// mean 2, population variance 2/3: (x - 2) / sqrt(2/3 + 1e-7).
		{"three", []float32{1, 2, 3}, []float32{float32(-1 / math.Sqrt(2.0/3+1e-7)), 0, float32(1 / math.Sqrt(2.0/3+1e-7))}},
		// variance 0: the eps keeps it finite, zeros out.
		{"constant", []float32{0.7, 0.7}, []float32{0, 0}},
		{"sine", sine(16000, 0.5, 440, 0.01, 1), nil},
		{"one sample", []float32{-3}, []float32{0}},
	} {
		x := append([]float32(nil), tc.x...)
		if err := Normalize(x); err != nil {
			t.Fatal(err)
		}
		for i := range tc.want {
			if math.Abs(float64(x[i]-tc.want[i])) > 1e-6 {
				t.Errorf("%s: sample %d = %v, want %v", tc.name, i, x[i], tc.want[i])
			}
		}
		if tc.want == nil {
			// variance v/(v+eps) with v = 0.01^2/2.
			m, v := moments(x)
			if wantV := 5e-5 / (5e-5 + NormEps); math.Abs(m) > 1e-6 || math.Abs(v-wantV) > 1e-5 {
				t.Errorf("%s: mean %g, variance %g; want 0, %g", tc.name, m, v, wantV)
			}
		}
	}
	if err := Normalize(nil); err == nil {
		t.Error("empty waveform normalised")
	}
}

func TestBatch(t *testing.T) {
	waves := [][]float32{{1, 2, 3, 4, 5}, {2, 4}, {7, -7, 7}}
	for _, tc := range []struct {
		name    string
		e       Extractor
		T       int
		lengths []int
	}{
		{"no crop", Extractor{MaxSamples: NoCrop}, 5, []int{5, 2, 3}},
		{"crop 3", Extractor{MaxSamples: 3}, 3, []int{3, 2, 3}},
		{"crop 10", Extractor{MaxSamples: 10}, 5, []int{5, 2, 3}},
		{"crop 1, normalised", Extractor{MaxSamples: 1, Normalize: true}, 1, []int{1, 1, 1}},
		{"default", DefaultExtractor(), 5, []int{5, 2, 3}},
	} {
		in, err := tc.e.Batch(waves)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if in.B != 3 || in.T != tc.T || len(in.Values) != 3*tc.T || len(in.Mask) != 3*tc.T {
			t.Fatalf("%s: batch %d x %d, %d values, %d mask, want 3 x %d", tc.name, in.B, in.T, len(in.Values), len(in.Mask), tc.T)
		}
		for b, n := range in.SampleLengths() {
			if n != tc.lengths[b] {
				t.Errorf("%s: row %d has %d real samples, want %d", tc.name, b, n, tc.lengths[b])
			}
			want := append([]float32(nil), waves[b][:n]...)
			if tc.e.Normalize {
				normalize(want) // over the cropped, real samples only
			}
			for i := range tc.T {
				v, m := in.Values[b*tc.T+i], in.Mask[b*tc.T+i]
				if i < n && (v != want[i] || m != 1) || i >= n && (v != 0 || m != 0) {
					t.Errorf("%s: row %d sample %d = %v mask %v", tc.name, b, i, v, m)
				}
			}
			if tc.e.Normalize && n > 1 {
				if mean, v := moments(in.Values[b*tc.T : b*tc.T+n]); math.Abs(mean) > 1e-6 || math.Abs(v-1) > 1e-5 {
					t.Errorf("%s: row %d mean %g variance %g", tc.name, b, mean, v)
				}
			}
		}
	}
	if waves[0][0] != 1 || waves[2][1] != -7 {
		t.Error("Batch modified its input")
	}
	// The normalised rows of the default extractor: mean 0, variance 1
	// over the real samples, whatever the padding.
	in, err := DefaultExtractor().Batch(waves)
	if err != nil {
		t.Fatal(err)
	}
	if m, v := moments(in.Values[5 : 5+2]); math.Abs(m) > 1e-7 || math.Abs(v-1/(1+NormEps)) > 1e-6 {
		t.Errorf("padded row: mean %g variance %g", m, v)
	}
}

func TestBatchErrors(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name  string
		e     Extractor
		waves [][]float32
		want  string
	}{
		{"no waveforms", DefaultExtractor(), nil, "batch of no waveforms"},
		{"empty", DefaultExtractor(), [][]float32{{1}, {}}, "waveform 1 is empty"},
		{"NaN", DefaultExtractor(), [][]float32{{1, 2, nan}}, "waveform 0 sample 2: non-finite"},
		{"Inf", DefaultExtractor(), [][]float32{{1}, {float32(math.Inf(-1))}}, "waveform 1 sample 0: non-finite"},
		{"explicit 0", Extractor{MaxSamples: 0}, [][]float32{{1}}, "max samples 0"},
		{"negative", Extractor{MaxSamples: -5}, [][]float32{{1}}, "max samples -5"},
	} {
		if _, err := tc.e.Batch(tc.waves); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
