package serve

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	"github.com/nvdp-project/nvdp/jsonfloat"
)

// edgeFloats are float32 values at encoding/json's format boundaries (1e-6
// and 1e21, where %f turns to %e), signed zeros, the extremes and values on
// the release lattice 2^-18.
var edgeFloats = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 0.5, 0.1, 1.0 / 3,
	1e-6, math.Nextafter32(1e-6, 0), math.Nextafter32(1e-6, 1), -1e-6, 1e-7, 9.99e-7, 1.5e-10,
	1e21, math.Nextafter32(1e21, 0), math.Nextafter32(1e21, float32(math.Inf(1))), -1e21, 1e20, 123456789,
	math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1.17549435e-38,
	3 * 0x1p-18, -12345 * 0x1p-18, 0x1p-18, 0x1p-24,
}

// appendEmbedResponse writes what json.Marshal writes for the same
// response: nil and empty slices, the edge values, and random releases on
// the lattice and off it.
func TestAppendEmbedResponse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	release := func(n, p int, lattice bool) ([][]float32, []float32) {
		rows := make([][]float32, n)
		for i := range rows {
			rows[i] = make([]float32, p)
			for j := range rows[i] {
				v := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(30)-15))
				if lattice {
					v = math.Round(rng.NormFloat64()*(1<<18)) / (1 << 18)
				}
				rows[i][j] = float32(v)
			}
		}
		pi := make([]float32, n)
		for i := range pi {
			pi[i] = rng.Float32() / float32(n)
		}
		return rows, pi
	}
	z1, pi1 := release(65, 128, true)
	z2, pi2 := release(3, 7, false)
	priv := Privacy{RDCertified: 1.5, Order: 2, Epsilon: jsonfloat.Float(math.Inf(1)), Delta: 1e-5, Releases: 2, Account: "a\"<b>",
		SpentEpsilon: 3, BudgetEpsilon: jsonfloat.Float(math.Inf(1)), RemainingEpsilon: jsonfloat.Float(math.NaN()), RemainingReleases: 4}
	for _, tc := range []struct {
		name string
		r    EmbedResponse
	}{
		{"nil", EmbedResponse{}},
		{"empty", EmbedResponse{Embeddings: [][][]float32{}, Weights: [][]float32{}}},
		{"nil rows", EmbedResponse{Embeddings: [][][]float32{nil, {nil, {}}}, Weights: [][]float32{nil, {}}}},
		{"edges", EmbedResponse{Embeddings: [][][]float32{{edgeFloats}}, Weights: [][]float32{edgeFloats}, Privacy: priv}},
		{"releases", EmbedResponse{Embeddings: [][][]float32{z1, z2}, Weights: [][]float32{pi1, pi2}, Privacy: priv}},
	} {
		want, err := json.Marshal(tc.r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEmbedResponse([]byte("x"), &tc.r)
		if err != nil || !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Errorf("%s: %v\n got %.300s\nwant %.300s", tc.name, err, got, want)
		}
		rec := httptest.NewRecorder()
		writeEmbedJSON(rec, &tc.r)
		if body := rec.Body.Bytes(); !bytes.Equal(body, append(want, '\n')) || rec.Header().Get("Content-Length") != itoa(len(want)+1) {
			t.Errorf("%s: writeEmbedJSON wrote %d bytes (Content-Length %s), want json.Marshal's %d and a newline", tc.name, len(body), rec.Header().Get("Content-Length"), len(want))
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// A non-finite value is an error, as json.Marshal's.
func TestAppendEmbedResponseNonFinite(t *testing.T) {
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, r := range []EmbedResponse{{Embeddings: [][][]float32{{{1, v}}}}, {Weights: [][]float32{{v}}}} {
			if _, err := json.Marshal(r); err == nil {
				t.Fatalf("json.Marshal took %v", v)
			}
			if _, err := appendEmbedResponse(nil, &r); err == nil {
				t.Errorf("%v: no error", v)
			}
		}
	}
}

// FuzzAppendFloats: every finite float32, as bits, is written as
// json.Marshal writes it.
func FuzzAppendFloats(f *testing.F) {
	for _, v := range edgeFloats {
		f.Add(math.Float32bits(v))
	}
	f.Fuzz(func(t *testing.T, bits uint32) {
		v := []float32{math.Float32frombits(bits)}
		want, werr := json.Marshal(v)
		got, err := appendFloats(nil, v)
		if (werr != nil) != (err != nil) || werr == nil && !bytes.Equal(got, want) {
			t.Errorf("%#x: %s (%v), json.Marshal %s (%v)", bits, got, err, want, werr)
		}
	})
}

// BenchmarkEmbedJSON: the JSON body of one release of the main job's shape
// (N 65, P 128, values on the lattice 2^-18), by json.Marshal and by
// appendEmbedResponse.
func BenchmarkEmbedJSON(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	rows := make([][]float32, 65)
	for i := range rows {
		rows[i] = make([]float32, 128)
		for j := range rows[i] {
			rows[i][j] = float32(math.Round(rng.NormFloat64()*(1<<18)) / (1 << 18))
		}
	}
	pi := make([]float32, 65)
	for i := range pi {
		pi[i] = rng.Float32() / 65
	}
	r := EmbedResponse{Embeddings: [][][]float32{rows}, Weights: [][]float32{pi}, Privacy: Privacy{RDCertified: 1, Order: 2, Epsilon: 3, Delta: 1e-5, Releases: 1}}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = appendEmbedResponse(buf[:0], &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
