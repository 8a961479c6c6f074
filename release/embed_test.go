package release

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nvdp-project/nvdp/nvib"
	"github.com/nvdp-project/nvdp/option"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/progress"
	"github.com/nvdp-project/nvdp/safetensors"
)

// manyTexts returns n texts, one per line.
func manyTexts(n int) (lines string, texts []string) {
	for i := range n {
		texts = append(texts, fmt.Sprintf("%s movie %s", words[i%6], words[6+i%8]))
	}
	return strings.Join(texts, "\n") + "\n", texts
}

// readSafetensors reads an Embed output: its metadata and z, pi as [texts][k] releases.
func readSafetensors(t *testing.T, path string) (*Metadata, [][]Embedding) {
	t.Helper()
	f, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md, err := ParseMetadataKeys(f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	zt, _ := f.Get("z")
	pt, _ := f.Get("pi")
	M, k, N, P := int(md.Texts), md.ReleasesPerText, md.Model.N, md.Model.P
	if zt == nil || pt == nil || !slices.Equal(zt.Shape, []int{M, k, N, P}) || !slices.Equal(pt.Shape, []int{M, k, N}) {
		t.Fatalf("%s: tensors %v, want z [%d %d %d %d] and pi [%d %d %d]", path, f.Tensors, M, k, N, P, M, k, N)
	}
	z, _ := zt.Float32()
	pi, _ := pt.Float32()
	out := make([][]Embedding, M)
	for i := range out {
		for j := range k {
			r := i*k + j
			out[i] = append(out[i], Embedding{Z: z[r*N*P : (r+1)*N*P], Pi: pi[r*N : (r+1)*N]})
		}
	}
	return md, out
}

// jsonlText is one text's object of a JSONL output.
type jsonlText struct {
	Index      int           `json:"index"`
	Embeddings [][][]float32 `json:"embeddings"`
	Weights    [][]float32   `json:"weights"`
}

// readJSONL reads an Embed output in JSON lines: the metadata line and the releases.
func readJSONL(t *testing.T, path string) (*Metadata, [][]Embedding) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var md *Metadata
	var out [][]Embedding
	for sc.Scan() {
		if md == nil {
			dec := json.NewDecoder(strings.NewReader(sc.Text()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&md); err != nil {
				t.Fatalf("%s: metadata line: %v", path, err)
			}
			continue
		}
		var o jsonlText
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil || o.Index != len(out) || len(o.Embeddings) != md.ReleasesPerText || len(o.Weights) != md.ReleasesPerText {
			t.Fatalf("%s: line %d: %v (index %d, %d releases)", path, len(out)+2, err, o.Index, len(o.Embeddings))
		}
		var rel []Embedding
		for j, z := range o.Embeddings {
			if len(z) != md.Model.N || len(o.Weights[j]) != md.Model.N {
				t.Fatalf("%s: text %d release %d: %d rows, %d weights", path, o.Index, j, len(z), len(o.Weights[j]))
			}
			rel = append(rel, Embedding{Z: slices.Concat(z...), Pi: o.Weights[j]})
		}
		out = append(out, rel)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return md, out
}

// Embed writes exactly the releases of ReleaseRepeated with the same seed (every value, both
// formats, k = 1 and 3), with the metadata: the model, the guarantee of one release and of the k
// composed, the counts, the not-for-release mark of a seeded source.
func TestEmbedOutputs(t *testing.T) {
	r := load(t, nvib.ModelNVDPClipped)
	data, texts := manyTexts(13)
	ctx := context.Background()
	for _, format := range []Format{FormatSafetensors, FormatJSONL} {
		for _, k := range []int{1, 3} {
			o := handSetOptions(r)
			o.Out, o.Format, o.ReleasesPerText = filepath.Join(t.TempDir(), "out."+string(format)), format, k
			md, err := Embed(ctx, r, NewLineReader(strings.NewReader(data), "in.txt"), NewSeededSource(3), o, nil)
			if err != nil {
				t.Fatal(err)
			}
			read := readSafetensors
			if format == FormatJSONL {
				read = readJSONL
			}
			got, es := read(t, o.Out)
			want, err := r.ReleaseRepeated(ctx, texts, k, NewSeededSource(3))
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != len(texts) {
				t.Fatalf("%s k %d: %d texts, want %d", format, k, len(es), len(texts))
			}
			for i := range want {
				for j := range k {
					if !slices.Equal(es[i][j].Z, want[i][j].Z) || !slices.Equal(es[i][j].Pi, want[i][j].Pi) {
						t.Fatalf("%s k %d: text %d release %d differs from ReleaseRepeated", format, k, i, j)
					}
				}
			}
			perText, _ := r.GuaranteeOf(k)
			if got.Format != MetadataFormat || got.Texts != 13 || got.Releases != int64(13*k) || got.ReleasesPerText != k || !got.Seeded ||
				got.Warning != NotForRelease || got.Model.Dir != r.Model().Dir || got.Model.N != 9 || got.Model.P != 8 ||
				!slices.Equal(got.Guarantee.Curve, r.Guarantee().Curve) || got.Guarantee.Epsilon != r.Guarantee().Epsilon ||
				got.Guarantee.Label != "certified" || !slices.Equal(got.GuaranteePerText.Curve, perText.Curve) ||
				got.GuaranteePerText.Epsilon != perText.Epsilon || got.GuaranteePerText.Releases != k || got.Layout != layout(format) {
				t.Errorf("%s k %d: metadata %+v", format, k, got)
			}
			if md.Texts != got.Texts || md.Releases != got.Releases {
				t.Errorf("%s k %d: returned metadata %d texts, file %d", format, k, md.Texts, got.Texts)
			}
		}
	}
}

// The safetensors metadata entries are the fields of Metadata, strings bare, objects as JSON, and
// read back to the same metadata; a file without the release format is refused.
func TestMetadataKeys(t *testing.T) {
	r := load(t, nvib.ModelGaussian)
	md := &Metadata{Format: MetadataFormat, Model: r.Model(), Layout: layout(FormatSafetensors), Guarantee: r.Guarantee(),
		GuaranteePerText: r.Guarantee(), Texts: 12, ReleasesPerText: 1, Releases: 12, Seeded: true, Warning: NotForRelease}
	keys, err := md.MetadataKeys()
	if err != nil {
		t.Fatal(err)
	}
	if keys["format"] != MetadataFormat || keys["texts"] != "12" || keys["seeded"] != "true" || keys["warning"] != NotForRelease ||
		!strings.HasPrefix(keys["model"], `{"dir":`) || !strings.Contains(keys["guarantee"], `"label":"certified"`) {
		t.Errorf("keys %v", keys)
	}
	back, err := ParseMetadataKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(md)
	b, _ := json.Marshal(back)
	if string(a) != string(b) {
		t.Errorf("round trip:\n%s\n%s", a, b)
	}
	if _, err := ParseMetadataKeys(map[string]string{"format": "x"}); err == nil {
		t.Error("a foreign format was read")
	}
	keys["texts"] = `"many"`
	if _, err := ParseMetadataKeys(keys); err == nil || !strings.Contains(err.Error(), "texts") {
		t.Errorf("a string count: %v", err)
	}
}

// Embed streams: while the input is still open (a pipe whose writer has sent only the first texts),
// the first batches are released and written into the temporary output file, which grows; the
// output appears only when the input has ended. Memory is one batch of texts and releases (plus
// bounded write buffers), whatever the input's length.
func TestEmbedStreams(t *testing.T) {
	r := load(t, nvib.ModelNVDPClipped)
	dir := t.TempDir()
	o := handSetOptions(r)
	o.Out, o.BatchSize = filepath.Join(dir, "out.safetensors"), 4
	pr, pw := io.Pipe()
	written := make(chan int64, 100)
	report := func(e progress.Event) {
		if e.Stage == ProgressStage && e.Total <= 0 {
			written <- e.Done
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := Embed(context.Background(), r, NewLineReader(pr, "pipe"), NewSeededSource(1), o, report)
		done <- err
	}()
	scratch := func() (size int64) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && strings.HasPrefix(e.Name(), ".out.safetensors.tmp") {
				size += fi.Size()
			}
		}
		return size
	}
	var sizes []int64
	for batch := range 3 {
		for i := range 4 {
			fmt.Fprintf(pw, "text %d of batch %d\n", i, batch)
		}
		// the batch's last line is in; the next Next() of the batch after it blocks on the pipe
		if batch == 0 {
			continue // the first batch is read in full before the output is created
		}
		select {
		case n := <-written:
			if n != int64(4*batch) {
				t.Fatalf("progress after batch %d: %d texts", batch, n)
			}
		case <-time.After(time.Minute):
			t.Fatalf("batch %d was not written while the input stayed open", batch)
		}
		if _, err := os.Stat(o.Out); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the output exists before the input has ended: %v", err)
		}
		sizes = append(sizes, scratch())
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// batch 1 is written when batch 2's first line arrives, batch 2 when batch 3's does
	if len(sizes) != 2 || !(sizes[0] > 0) {
		t.Fatalf("temporary output sizes while streaming: %v", sizes)
	}
	md, es := readSafetensors(t, o.Out)
	if md.Texts != 12 || len(es) != 12 {
		t.Errorf("%d texts written, want 12", md.Texts)
	}
	if s := scratch(); s != 0 {
		t.Errorf("%d bytes of temporary files left", s)
	}
}

// Any failure leaves no output and no temporary file, and an older output untouched: a bad line
// after batches were written, a cancelled context, an input without texts; bad options are
// *option.Error naming the option, before any work.
func TestEmbedFailureLeavesNothing(t *testing.T) {
	r := load(t, nvib.ModelNVDPClipped)
	data, _ := manyTexts(10)
	for _, tc := range []struct {
		name, data string
		ctx        func() context.Context
		want       string
	}{
		{"bad line late", data + "fine\n\xff\xfe\n", nil, "in:12: text is not valid UTF-8"},
		{"empty line late", data + "\nfine\n", nil, "in:11: empty text"},
		{"no texts", "", nil, "in: no texts"},
		{"cancelled", data, func() context.Context { c, cancel := context.WithCancel(context.Background()); cancel(); return c }, "context canceled"},
	} {
		for _, format := range []Format{FormatSafetensors, FormatJSONL} {
			dir := t.TempDir()
			o := handSetOptions(r)
			o.Out, o.Format, o.BatchSize = filepath.Join(dir, "out"), format, 3
			if err := os.WriteFile(o.Out, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			_, err := Embed(ctx, r, NewLineReader(strings.NewReader(tc.data), "in"), NewSeededSource(1), o, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s %s: error %v, want %q", tc.name, format, err, tc.want)
			}
			if b, _ := os.ReadFile(o.Out); string(b) != "old" {
				t.Errorf("%s %s: the old output was changed", tc.name, format)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%s %s: %d files in the output directory, want only the old output", tc.name, format, len(entries))
			}
		}
	}
	good := handSetOptions(r)
	good.Out = filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		mod func(*EmbedOptions)
		key string
	}{
		{func(o *EmbedOptions) { o.Out = "" }, "out"},
		{func(o *EmbedOptions) { o.Out = filepath.Join(t.TempDir(), "missing", "out") }, "out"},
		{func(o *EmbedOptions) { o.Out = t.TempDir() }, "out"},
		{func(o *EmbedOptions) { o.Format = "csv" }, "format"},
		{func(o *EmbedOptions) { o.ReleasesPerText = 0 }, "releases_per_text"},
		{func(o *EmbedOptions) { o.BatchSize = 0 }, "batch_size"},
		{func(o *EmbedOptions) { o.MaxEpsilon = 0 }, "max_epsilon"},
		{func(o *EmbedOptions) { o.MaxEpsilon = math.NaN() }, "max_epsilon"},
	} {
		o := good
		tc.mod(&o)
		_, err := Embed(context.Background(), r, NewLineReader(strings.NewReader(data), "in"), NewSeededSource(1), o, nil)
		var oe *option.Error
		if !errors.As(err, &oe) || oe.Option != tc.key {
			t.Errorf("%+v: error %v, want an option error naming %s", o, err, tc.key)
		}
	}
}

// handSetOptions are the default options of r with no epsilon threshold:
// the tests' tiny models are hand-set (they certify thousands).
func handSetOptions(r *Releaser) EmbedOptions {
	o := DefaultEmbedOptions(r)
	o.MaxEpsilon = math.Inf(1)
	return o
}

// TestEmbedMaxEpsilon: by default Embed refuses a model certifying more than
// privacy.DefaultMaxEpsilon per release, before anything is written, naming
// the option and the model's epsilon; a threshold above it accepts it.
func TestEmbedMaxEpsilon(t *testing.T) {
	r := load(t, nvib.ModelNVDPClipped)
	eps := float64(r.Guarantee().Epsilon)
	o := DefaultEmbedOptions(r)
	if o.MaxEpsilon != privacy.DefaultMaxEpsilon || !(eps > o.MaxEpsilon) {
		t.Fatalf("set-up: max epsilon %v, the model certifies %v", o.MaxEpsilon, eps)
	}
	dir := t.TempDir()
	o.Out = filepath.Join(dir, "out")
	_, err := Embed(context.Background(), r, NewLineReader(strings.NewReader("a\nb\n"), "in"), NewSeededSource(1), o, nil)
	var oe *option.Error
	if !errors.As(err, &oe) || oe.Option != "max_epsilon" || !strings.Contains(err.Error(), fmt.Sprintf("certifies epsilon %.4g per release", eps)) {
		t.Fatalf("default threshold: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files written", len(entries))
	}
	o.MaxEpsilon = eps * 1.001
	if _, err := Embed(context.Background(), r, NewLineReader(strings.NewReader("a\nb\n"), "in"), NewSeededSource(1), o, nil); err != nil {
		t.Errorf("threshold above the model's epsilon: %v", err)
	}
}

// TestCheckMemoryNamesOptions (issue 32): the batch-memory error is an
// *option.Error about the library's options, naming no flag.
func TestCheckMemoryNamesOptions(t *testing.T) {
	cases := []struct {
		o    EmbedOptions
		want string // the option blamed, "" when it fits
	}{
		{EmbedOptions{BatchSize: 32, ReleasesPerText: 1}, ""},
		{EmbedOptions{BatchSize: 32, ReleasesPerText: 1_000_000}, "releases_per_text"},
		{EmbedOptions{BatchSize: 100_000_000, ReleasesPerText: 1}, "batch_size"},
	}
	for _, c := range cases {
		err := c.o.CheckMemory(65, 128)
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.o, err)
			}
			continue
		}
		var oe *option.Error
		if !errors.As(err, &oe) || oe.Option != c.want || strings.Contains(err.Error(), "--") ||
			!strings.Contains(err.Error(), "lower releases_per_text or batch_size") {
			t.Errorf("%+v: %v, want an option error about %s naming no flag", c.o, err, c.want)
		}
	}
}
