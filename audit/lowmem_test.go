package audit

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/privacy/privacytest"
)

// TestAuditLowMemoryIdentical: the low-memory engine (each tile converts
// its own examples) gives the same report as the engine with float64 copies
// of the whole file, bit for bit: whole audits (both directions, the mask,
// examples not a multiple of the tile size), a shard's part, and an audit of
// a memory-mapped file; with one worker and with several (each worker takes
// the same tiles in the same order in both modes).
func TestAuditLowMemoryIdentical(t *testing.T) {
	p := privacytest.RandomPosteriors(rand.New(rand.NewPCG(7, 8)), 37, 5, 11, 0.3)
	p.AttentionMask = make([]uint8, p.M*p.N)
	for x := range p.M {
		for i := range p.N - x%3 {
			p.AttentionMask[x*p.N+i] = 1
		}
	}
	for _, tc := range []struct {
		name string
		set  func(*Options)
	}{
		{"defaults", func(o *Options) {}},
		{"paper direction, mask", func(o *Options) { o.Direction, o.UseMask = privacy.DirectionPaper, true }},
		{"one order", func(o *Options) { o.BDPOrders = []float64{0.1} }},
		{"3 workers", func(o *Options) { o.Workers = 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := DefaultOptions()
			opt.ListInvalid, opt.Workers = p.M*p.M, 1
			tc.set(&opt)
			want, err := Audit(context.Background(), p, opt)
			if err != nil {
				t.Fatal(err)
			}
			opt.LowMemory = true
			got, err := Audit(context.Background(), p, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !sameReport(want, got) {
				t.Errorf("low-memory report differs:\n got %+v\nwant %+v", got, want)
			}
			opt.LowMemory = false
			wantPart, err := AuditShard(context.Background(), p, opt, Shard{Index: 1, Count: 3})
			if err != nil {
				t.Fatal(err)
			}
			opt.LowMemory = true
			gotPart, err := AuditShard(context.Background(), p, opt, Shard{Index: 1, Count: 3})
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(stripPart(wantPart), stripPart(gotPart)) {
				t.Errorf("low-memory shard part differs")
			}
		})
	}
	path := filepath.Join(t.TempDir(), "p.safetensors")
	if err := privacy.WritePosteriors(path, p); err != nil {
		t.Fatal(err)
	}
	mp, release, err := privacy.MapPosteriors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	opt := DefaultOptions()
	opt.Workers = 1
	want, err := Audit(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.LowMemory = true
	got, err := Audit(context.Background(), mp, opt)
	if err != nil {
		t.Fatal(err)
	}
	want.Metadata, got.Metadata = nil, nil // the file's metadata: written by WritePosteriors
	if !sameReport(want, got) {
		t.Errorf("low-memory audit of the mapped file differs:\n got %+v\nwant %+v", got, want)
	}
}

// TestAuditMappedPosteriors: the audit of a memory-mapped posterior file
// (privacy.MapPosteriors) is the audit of the file read into memory
// (privacy.ReadPosteriors), number for number (one worker). The mapping
// itself is privacy's TestMapPosteriors.
func TestAuditMappedPosteriors(t *testing.T) {
	_, read, mapped := privacytest.MaskedFile(t, t.TempDir())
	opt := DefaultOptions()
	opt.Workers = 1
	want, got := mustAudit(t, read, opt), mustAudit(t, mapped, opt)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("audit of the mapped file\n%+v\nof the read file\n%+v", got, want)
	}
}

// stripPart is a part without its wall time.
func stripPart(p *Part) Part {
	c := *p
	c.Seconds = 0
	return c
}

// sameReport compares two reports but their wall times as JSON (NaN, the
// pooled cost of an infinite order, equals itself there; every float is
// written exactly).
func sameReport(a, b *Report) bool {
	ca, cb := *a, *b
	ca.Seconds, cb.Seconds = 0, 0
	return sameJSON(ca, cb)
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// TestAuditDeterministicWorkers: with several workers an audit gives the
// same report on every run, its sums (rd_mean, the BDP costs) included:
// tiles go to workers round-robin and the workers' statistics are merged in
// worker order. (Dynamic scheduling made the last bits of the sums depend
// on which worker finished first.)
func TestAuditDeterministicWorkers(t *testing.T) {
	p := privacytest.RandomPosteriors(rand.New(rand.NewPCG(7, 8)), 53, 5, 11, 0.3)
	opt := DefaultOptions()
	opt.Workers = 3
	first, err := Audit(context.Background(), p, opt)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		r, err := Audit(context.Background(), p, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !sameReport(first, r) {
			t.Fatalf("two audits with 3 workers differ: rd_mean %v vs %v", *r.RDMean, *first.RDMean)
		}
	}
}

// TestFitMemory: low memory is chosen exactly when the float64 copies take
// more than half the available memory, in principled mode, and never undone.
func TestFitMemory(t *testing.T) {
	p := &privacy.Posteriors{M: 10, N: 5, P: 4} // copies: 16 * 200 = 3200 bytes
	for _, c := range []struct {
		mode      privacy.Mode
		set       bool
		available float64
		want      bool
	}{
		{privacy.ModePrincipled, false, 6400, false},
		{privacy.ModePrincipled, false, 6399, true},
		{privacy.ModePrincipled, false, 0, false},
		{privacy.ModeReference, false, 100, false},
		{privacy.ModePrincipled, true, 1e9, false},
	} {
		o := DefaultOptions()
		o.Mode, o.LowMemory = c.mode, c.set
		if got := o.FitMemory(p, c.available); got != c.want || o.LowMemory != (c.want || c.set) {
			t.Errorf("%+v: set %v, LowMemory %v", c, got, o.LowMemory)
		}
	}
	if copiesBytes(p) != 3200 {
		t.Errorf("copiesBytes %v", copiesBytes(p))
	}
}

// TestOptionsLong: an audit reports its progress above 1e9 pairs x
// components x dims (all pairs, or the --pairs sample), in principled mode only.
func TestOptionsLong(t *testing.T) {
	p := &privacy.Posteriors{M: 1001, N: 100, P: 10} // 1001 * 1000 pairs x 1000 = 1.001e9
	for _, c := range []struct {
		name  string
		mode  privacy.Mode
		m     int
		pairs int
		want  bool
	}{
		{"all pairs, just above", privacy.ModePrincipled, 1001, 0, true},
		{"all pairs, below", privacy.ModePrincipled, 1000, 0, false}, // 999000 x 1000 < 1e9
		{"a sample", privacy.ModePrincipled, 1001, 1000, false},
		{"reference", privacy.ModeReference, 1001, 0, false},
	} {
		o := DefaultOptions()
		o.Mode, o.Pairs = c.mode, c.pairs
		q := *p
		q.M = c.m
		if got := o.Long(&q); got != c.want {
			t.Errorf("%s: Long %v, want %v", c.name, got, c.want)
		}
	}
}
