package release

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
	"github.com/nvdp-project/nvdp/privacy"
	"github.com/nvdp-project/nvdp/safetensors"
)

// Format is the file format of Embed's output.
type Format string

// The output formats.
const (
	// FormatSafetensors writes the float32 tensors z [texts, k, N, P] and pi [texts, k, N], for k
	// releases per text, with the Metadata in the file's metadata as [Metadata.MetadataKeys]
	// encodes it.
	FormatSafetensors Format = "safetensors"
	// FormatJSONL writes the Metadata as the first line, then one object per text in input order:
	// {"index": i, "embeddings": [k x [N x [P]]], "weights": [k x [N]]}.
	FormatJSONL Format = "jsonl"
)

// FormatOf returns the format an output file's name asks for: [FormatJSONL] when it ends in .jsonl
// (in any case), else [FormatSafetensors].
func FormatOf(out string) Format {
	if strings.EqualFold(filepath.Ext(out), ".jsonl") {
		return FormatJSONL
	}
	return FormatSafetensors
}

// Valid reports whether f is a known format.
func (f Format) Valid() bool { return f == FormatSafetensors || f == FormatJSONL }

// MetadataFormat names the layout of Embed's output files, in [Metadata].Format.
const MetadataFormat = "nvdp-release/1"

// NotForRelease is the warning of an output whose noise comes from a seeded source, made by
// [NewSeededSource].
const NotForRelease = "not for release: the noise comes from a fixed seed, so anyone who knows the seed can reproduce and remove it; the guarantee does not hold"

// Metadata describes an output of Embed: the model, the certified guarantee of one release and of the
// releases of one text composed, the counts, and whether the noise was seeded. It never holds a text.
type Metadata struct {
	Format string    `json:"format"` // MetadataFormat
	Model  ModelInfo `json:"model"`
	// Layout says what the file holds and in which order.
	Layout string `json:"layout"`
	// Guarantee is the certified guarantee of one release, from [Releaser.Guarantee].
	Guarantee *privacy.Guarantee `json:"guarantee"`
	// GuaranteePerText is the total certified cost per text: its ReleasesPerText releases composed
	// by [Releaser.GuaranteeOf], that is ReleasesPerText times the RDP curve, with epsilon at delta
	// of the sum.
	GuaranteePerText *privacy.Guarantee `json:"guarantee_per_text"`
	Texts            int64              `json:"texts"`
	ReleasesPerText  int                `json:"releases_per_text"`
	Releases         int64              `json:"releases"` // Texts x ReleasesPerText
	// Seeded is true when the noise came from [NewSeededSource]; Warning is then [NotForRelease].
	Seeded  bool   `json:"seeded"`
	Warning string `json:"warning,omitempty"`
}

// NewMetadata returns the Metadata of releases in format f of the model described by model: one
// release's guarantee one, the guarantee of releasesPerText releases of one text perText, and, for
// noise from a seeded source, Seeded with the [NotForRelease] warning. The counts (Texts, Releases)
// are the caller's to set once known.
func NewMetadata(model ModelInfo, one, perText *privacy.Guarantee, f Format, releasesPerText int, seeded bool) *Metadata {
	m := &Metadata{Format: MetadataFormat, Model: model, Layout: layout(f), Guarantee: one, GuaranteePerText: perText,
		ReleasesPerText: releasesPerText, Seeded: seeded}
	if seeded {
		m.Warning = NotForRelease
	}
	return m
}

// MetadataKeys returns m as safetensors metadata, with one entry per field of Metadata under its
// JSON key. Each value is the field's JSON text, a string field's without quotes: "model" and the
// guarantees are JSON objects, the counts numbers, and "seeded" true or false. [ParseMetadataKeys]
// reads it back.
func (m *Metadata) MetadataKeys() (map[string]string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(fields))
	for k, raw := range fields {
		out[k] = string(raw)
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out[k] = s
		}
	}
	return out, nil
}

// ParseMetadataKeys reads the Metadata of a safetensors output from its metadata, as
// [Metadata.MetadataKeys] wrote it. A value that is not JSON is a string field's. It returns an
// error when the "format" entry is missing or is not [MetadataFormat], and for a value of the wrong
// type, naming the key.
func ParseMetadataKeys(md map[string]string) (*Metadata, error) {
	if md["format"] != MetadataFormat {
		return nil, fmt.Errorf("release metadata: format %q, want %q", md["format"], MetadataFormat)
	}
	fields := make(map[string]json.RawMessage, len(md))
	for k, v := range md {
		if json.Valid([]byte(v)) {
			fields[k] = json.RawMessage(v)
		} else {
			fields[k], _ = json.Marshal(v)
		}
	}
	b, _ := json.Marshal(fields)
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("release metadata: %w", err)
	}
	return &m, nil
}

// countSlack is the room reserved in a header for the counts, known only at the end: the header is
// first encoded with every count 0, and at most 8 integers grow to at most 20 digits each.
const countSlack = 8 * 20

// outputWriter streams the releases of an Embed into the (temporary) output file f.
type outputWriter interface {
	// write appends the releases of the next texts (es[i][j]: release j of text i) to the files
	// (flushed: a batch is on its way to disk before the next is read).
	write(es [][]Embedding) error
	// finish writes md (with the final counts) and everything buffered; f is then complete.
	finish(md *Metadata) error
	// close releases scratch resources (after finish or on failure).
	close()
}

// newOutputWriter starts the output of format into f (the temporary file of path) for releases of
// shape [N, P], k per text; md is the metadata with zero counts (its size with the final counts is
// reserved).
func newOutputWriter(format Format, f *os.File, path string, md *Metadata) (outputWriter, error) {
	switch format {
	case FormatSafetensors:
		return newSafetensorsWriter(f, path, md)
	case FormatJSONL:
		return newJSONLWriter(f, md)
	}
	return nil, fmt.Errorf("unknown format %q", format)
}

// appendFloats appends v as little-endian float32.
func appendFloats(b []byte, v []float32) []byte {
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// writeReserved writes prefix and then b, padded with spaces to the n bytes reserved for it, at the
// start of f. Errors: b longer than n (the reservation was too small: a programmer error, reported as
// an error since the output is then discarded), a write error.
func writeReserved(f *os.File, prefix, b []byte, n int, what string) error {
	if len(b) > n {
		return fmt.Errorf("%s has %d bytes, more than the %d reserved", what, len(b), n)
	}
	_, err := f.WriteAt(slices.Concat(prefix, b, bytes.Repeat([]byte{' '}, n-len(b))), 0)
	return err
}

// safetensorsWriter writes z straight into the output after a reserved header, pi into a scratch file
// beside it (1/P of z's size) that is appended at the end; then the header goes into its room. z is
// written once, never copied.
type safetensorsWriter struct {
	f        *os.File
	z        *bufio.Writer
	piFile   *os.File
	pi       *bufio.Writer
	reserved int // header bytes reserved (a multiple of 8)
	n, p, k  int
	texts    int64
	buf      []byte
}

func newSafetensorsWriter(f *os.File, path string, md *Metadata) (*safetensorsWriter, error) {
	w := &safetensorsWriter{f: f, n: md.Model.N, p: md.Model.P, k: md.ReleasesPerText}
	hdr, err := w.header(md)
	if err != nil {
		return nil, err
	}
	w.reserved = (len(hdr) + countSlack + 7) / 8 * 8
	if _, err := f.Seek(int64(8+w.reserved), io.SeekStart); err != nil {
		return nil, err
	}
	if w.piFile, err = atomicfile.CreateTemp(path); err != nil {
		return nil, err
	}
	w.z, w.pi = bufio.NewWriterSize(f, 1<<20), bufio.NewWriterSize(w.piFile, 1<<16)
	return w, nil
}

// header encodes the header of md.Texts texts.
func (w *safetensorsWriter) header(md *Metadata) ([]byte, error) {
	keys, err := md.MetadataKeys()
	if err != nil {
		return nil, err
	}
	M := int(md.Texts)
	zBytes := int64(M) * int64(w.k*w.n*w.p*4)
	piBytes := int64(M) * int64(w.k*w.n*4)
	return safetensors.EncodeHeader([]safetensors.HeaderEntry{
		{Name: "z", DType: safetensors.F32, Shape: []int{M, w.k, w.n, w.p}, DataOffsets: [2]int64{0, zBytes}},
		{Name: "pi", DType: safetensors.F32, Shape: []int{M, w.k, w.n}, DataOffsets: [2]int64{zBytes, zBytes + piBytes}},
	}, keys)
}

func (w *safetensorsWriter) write(es [][]Embedding) error {
	for _, rel := range es {
		for _, e := range rel {
			w.buf = appendFloats(w.buf[:0], e.Z)
			if _, err := w.z.Write(w.buf); err != nil {
				return err
			}
			w.buf = appendFloats(w.buf[:0], e.Pi)
			if _, err := w.pi.Write(w.buf); err != nil {
				return err
			}
		}
		w.texts++
	}
	if err := w.z.Flush(); err != nil {
		return err
	}
	return w.pi.Flush()
}

func (w *safetensorsWriter) finish(md *Metadata) error {
	if md.Texts != w.texts {
		return fmt.Errorf("metadata counts %d texts, %d written", md.Texts, w.texts)
	}
	if _, err := w.piFile.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(w.z, w.piFile); err != nil {
		return err
	}
	if err := w.z.Flush(); err != nil {
		return err
	}
	hdr, err := w.header(md)
	if err != nil {
		return err
	}
	return writeReserved(w.f, binary.LittleEndian.AppendUint64(nil, uint64(w.reserved)), hdr, w.reserved, "the safetensors header")
}

func (w *safetensorsWriter) close() {
	if w.piFile != nil {
		w.piFile.Close()
		os.Remove(w.piFile.Name())
	}
}

// jsonlWriter writes the objects of the texts after a reserved first line, into which the metadata
// goes at the end (padded with spaces, which JSON allows).
type jsonlWriter struct {
	f        *os.File
	w        *bufio.Writer
	reserved int // bytes of the first line before its "\n"
	texts    int64
	buf      []byte
}

func newJSONLWriter(f *os.File, md *Metadata) (*jsonlWriter, error) {
	b, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	w := &jsonlWriter{f: f, w: bufio.NewWriterSize(f, 1<<20), reserved: len(b) + countSlack}
	if _, err := w.w.Write(append(bytes.Repeat([]byte{' '}, w.reserved), '\n')); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *jsonlWriter) write(es [][]Embedding) error {
	for _, rel := range es {
		b := append(w.buf[:0], `{"index":`...)
		b = strconv.AppendInt(b, w.texts, 10)
		b = append(b, `,"embeddings":[`...)
		for j, e := range rel {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			P := len(e.Z) / len(e.Pi)
			for i := range e.Pi {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONFloats(b, e.Z[i*P:(i+1)*P])
			}
			b = append(b, ']')
		}
		b = append(b, `],"weights":[`...)
		for j, e := range rel {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONFloats(b, e.Pi)
		}
		b = append(b, "]}\n"...)
		if _, err := w.w.Write(b); err != nil {
			return err
		}
		w.buf = b
		w.texts++
	}
	return w.w.Flush()
}

// appendJSONFloats appends v as a JSON array of the shortest decimals that read back as the same
// float32 values (finite: Release checks).
func appendJSONFloats(b []byte, v []float32) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']')
}

func (w *jsonlWriter) finish(md *Metadata) error {
	if md.Texts != w.texts {
		return fmt.Errorf("metadata counts %d texts, %d written", md.Texts, w.texts)
	}
	b, err := json.Marshal(md)
	if err != nil {
		return err
	}
	return writeReserved(w.f, nil, b, w.reserved, "the metadata line")
}

func (w *jsonlWriter) close() {}
