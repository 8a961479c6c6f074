// Package safetensors reads and writes Hugging Face safetensors files.
//
// The format, documented at https://huggingface.co/docs/safetensors, is an 8-byte little-endian
// unsigned header length N, then N bytes of UTF-8 JSON
//
//	{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//	 "__metadata__": {"key": "value"}}
//
// then the byte buffer. Offsets are relative to the start of the buffer; tensor data are row-major
// and little-endian.
//
// The reader rejects what the format's specification, under "Format" and "Notes" at
// https://github.com/huggingface/safetensors, rules out, and what its reference implementation
// rejects, naming the file and the tensor in every error:
//   - a header longer than [MaxHeaderSize] or than the file;
//   - a header that is not UTF-8, does not begin with '{', has anything but 0x20 padding after
//     the JSON object, or has a duplicate key in any object;
//   - metadata values that are not strings;
//   - a tensor entry without dtype, shape or data_offsets, or with unknown fields; with an
//     unknown dtype or a negative dimension; whose prod(shape) * dtype size overflows, by checked
//     multiplication; or whose offsets span another size;
//   - tensors that, sorted by offset, do not tile the byte buffer exactly: a gap, an overlap,
//     bytes after the last tensor, or offsets beyond the file.
//
// Empty tensors, with a 0 dimension, and scalars, with shape [], are valid. Tensor values are not
// checked: NaN and ±Inf are valid data. The writer pads the header with spaces to an 8-byte
// boundary, as the reference implementation does, and [WriteFile] replaces the destination
// atomically.
package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nvdp-project/nvdp/internal/atomicfile"
)

// DType is a safetensors element type name.
type DType string

// Element types of the safetensors format.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U64  DType = "U64"
	U32  DType = "U32"
	U16  DType = "U16"
	U8   DType = "U8"
	BOOL DType = "BOOL"
)

// MaxHeaderSize bounds the JSON header length the reader accepts: 100 MB, as in the reference
// implementation.
const MaxHeaderSize = 100 << 20

// Size returns the size of one element in bytes, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case I8, U8, BOOL:
		return 1
	}
	return 0
}

// Tensor is one named tensor. Data holds the raw little-endian bytes, with
// len(Data) = NumElements() * DType.Size().
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// File is a parsed safetensors file. Tensors are in buffer order, sorted by data offset, with empty
// tensors at one offset sorted by name.
type File struct {
	Metadata map[string]string
	Tensors  []*Tensor
}

// Get returns the tensor with the given name.
func (f *File) Get(name string) (*Tensor, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// NumElements returns the product of the shape, which is 1 for a scalar with shape [].
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// HeaderEntry is one tensor as described by the JSON header.
type HeaderEntry struct {
	Name        string
	DType       DType
	Shape       []int
	DataOffsets [2]int64 // [begin, end) relative to the start of the byte buffer
}

// Header is the parsed and validated header of a file.
type Header struct {
	Metadata   map[string]string
	Entries    []HeaderEntry // sorted by offset (empty tensors at one offset by name); they tile [0, BufferSize)
	DataOffset int64         // absolute file offset of the byte buffer (8 + header length)
	BufferSize int64         // byte buffer size (the last end offset; the file ends there)
}

// rawEntry is one tensor's header entry; pointers tell a missing or null
// field from an empty one (the format requires all three).
type rawEntry struct {
	DType       *DType   `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// ByteSize returns prod(shape) * dtype.Size() in bytes. It returns an error when a dimension is
// negative, the dtype is unknown, or the product overflows an int. This is the reference
// implementation's checked multiplication: a wrapped product would let a tiny file claim a huge
// tensor.
func ByteSize(dtype DType, shape []int) (int, error) {
	size := dtype.Size()
	if size == 0 {
		return 0, fmt.Errorf("unknown dtype %q", dtype)
	}
	n := 1
	for _, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("invalid shape %v (negative dimension)", shape)
		}
		if s != 0 && n > math.MaxInt/s {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n *= s
	}
	if n > math.MaxInt/size {
		return 0, fmt.Errorf("shape %v of %s overflows (%d elements of %d bytes)", shape, dtype, n, size)
	}
	return n * size, nil
}

// checkHeaderJSON enforces the format's rules on the header text that
// encoding/json does not (https://github.com/huggingface/safetensors, "Format"):
// valid UTF-8, the first byte '{', after the object nothing but 0x20 padding,
// and no duplicate key in any object.
func checkHeaderJSON(hdr []byte) error {
	if !utf8.Valid(hdr) {
		return errors.New("header is not valid UTF-8")
	}
	if len(hdr) == 0 || hdr[0] != '{' {
		return fmt.Errorf("header must begin with '{', begins with %q", hdr[:min(len(hdr), 16)])
	}
	type object struct {
		keys    map[string]bool
		wantKey bool
	}
	var stack []*object // nil entries are arrays
	dec := json.NewDecoder(bytes.NewReader(hdr))
	for {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("header is not a JSON object: %w", err)
		}
		if n := len(stack); n > 0 && stack[n-1] != nil && tok != json.Delim('}') {
			if top := stack[n-1]; top.wantKey {
				key := tok.(string) // the decoder only yields strings in key position
				if top.keys[key] {
					return fmt.Errorf("duplicate key %q at byte %d (the format disallows duplicate keys)", key, dec.InputOffset())
				}
				top.keys[key] = true
				top.wantKey = false
				continue
			} else {
				top.wantKey = true // tok starts this key's value
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &object{keys: map[string]bool{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, nil)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			break
		}
	}
	if i := bytes.IndexFunc(hdr[dec.InputOffset():], func(r rune) bool { return r != ' ' }); i >= 0 {
		at := int(dec.InputOffset()) + i
		return fmt.Errorf("%d bytes after the header JSON at byte %d (%q); only space padding is allowed",
			len(hdr)-at, at, hdr[at:min(len(hdr), at+16)])
	}
	return nil
}

// parseHeader validates the JSON header against the format: see
// checkHeaderJSON; __metadata__ maps strings to strings; every other key is a
// tensor with dtype, shape and data_offsets, whose byte span equals
// prod(shape) * dtype size; sorted by offset, the tensors cover the byte
// buffer [0, bufSize) exactly, without gaps or overlaps ("The byte buffer
// needs to be entirely indexed, and cannot contain holes").
func parseHeader(src string, hdr []byte, bufSize int64) (*Header, error) {
	if err := checkHeaderJSON(hdr); err != nil {
		return nil, fmt.Errorf("safetensors %s: %w", src, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("safetensors %s: header is not a JSON object: %w", src, err)
	}
	h := &Header{Metadata: map[string]string{}}
	for name, msg := range raw {
		if name == "__metadata__" {
			var md map[string]string
			if err := json.Unmarshal(msg, &md); err != nil {
				return nil, fmt.Errorf("safetensors %s: __metadata__ must map strings to strings: %w", src, err)
			}
			for k, v := range md {
				h.Metadata[k] = v
			}
			continue
		}
		e, err := parseEntry(name, msg, bufSize)
		if err != nil {
			return nil, fmt.Errorf("safetensors %s: tensor %q: %w", src, name, err)
		}
		h.Entries = append(h.Entries, e)
	}
	sort.Slice(h.Entries, func(i, j int) bool {
		a, b := h.Entries[i].DataOffsets, h.Entries[j].DataOffsets
		if a != b {
			return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
		}
		return h.Entries[i].Name < h.Entries[j].Name // empty tensors at one offset: a fixed order
	})
	var end int64 // end of the covered prefix of the buffer
	for i, c := range h.Entries {
		switch begin := c.DataOffsets[0]; {
		case begin < end:
			p := h.Entries[i-1]
			return nil, fmt.Errorf("safetensors %s: tensors %q [%d, %d] and %q [%d, %d] overlap",
				src, p.Name, p.DataOffsets[0], p.DataOffsets[1], c.Name, c.DataOffsets[0], c.DataOffsets[1])
		case begin > end:
			return nil, fmt.Errorf("safetensors %s: tensor %q: gap of %d bytes before its data_offsets [%d, %d] (the byte buffer must be covered without holes)",
				src, c.Name, begin-end, c.DataOffsets[0], c.DataOffsets[1])
		}
		end = c.DataOffsets[1]
	}
	if end != bufSize {
		return nil, fmt.Errorf("safetensors %s: %d trailing bytes after the last tensor (the byte buffer must be covered without holes)", src, bufSize-end)
	}
	h.BufferSize = end
	h.DataOffset = 8 + int64(len(hdr))
	return h, nil
}

// parseEntry validates one tensor's header entry; bufSize bounds its offsets.
func parseEntry(name string, msg json.RawMessage, bufSize int64) (HeaderEntry, error) {
	var e rawEntry
	d := json.NewDecoder(bytes.NewReader(msg))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return HeaderEntry{}, fmt.Errorf("bad header entry: %w", err)
	}
	switch {
	case e.DType == nil:
		return HeaderEntry{}, errors.New("dtype is missing")
	case e.Shape == nil:
		return HeaderEntry{}, errors.New("shape is missing (a scalar has shape [])")
	case e.DataOffsets == nil:
		return HeaderEntry{}, errors.New("data_offsets is missing")
	}
	if len(*e.DataOffsets) != 2 {
		return HeaderEntry{}, fmt.Errorf("data_offsets must have 2 entries, has %d", len(*e.DataOffsets))
	}
	begin, end := (*e.DataOffsets)[0], (*e.DataOffsets)[1]
	if begin < 0 || end < begin {
		return HeaderEntry{}, fmt.Errorf("invalid data_offsets [%d, %d]", begin, end)
	}
	shape := make([]int, len(*e.Shape))
	for i, s := range *e.Shape {
		if s < 0 || s > math.MaxInt {
			return HeaderEntry{}, fmt.Errorf("invalid shape %v", *e.Shape)
		}
		shape[i] = int(s)
	}
	want, err := ByteSize(*e.DType, shape)
	if err != nil {
		return HeaderEntry{}, err
	}
	if int64(want) != end-begin {
		return HeaderEntry{}, fmt.Errorf("shape %v of %s needs %d bytes, data_offsets [%d, %d] span %d",
			shape, *e.DType, want, begin, end, end-begin)
	}
	if end > bufSize {
		return HeaderEntry{}, fmt.Errorf("data_offsets [%d, %d] outside the %d-byte buffer (file truncated?)", begin, end, bufSize)
	}
	return HeaderEntry{Name: name, DType: *e.DType, Shape: shape, DataOffsets: [2]int64{begin, end}}, nil
}

func headerLength(src string, prefix []byte, total int64) (int64, error) {
	if len(prefix) < 8 {
		return 0, fmt.Errorf("safetensors %s: file has %d bytes, shorter than the 8-byte header length (truncated?)", src, len(prefix))
	}
	n := binary.LittleEndian.Uint64(prefix[:8])
	if n > MaxHeaderSize {
		return 0, fmt.Errorf("safetensors %s: header length %d exceeds %d bytes (not a safetensors file?)", src, n, MaxHeaderSize)
	}
	if total >= 0 && int64(n) > total-8 {
		return 0, fmt.Errorf("safetensors %s: header length %d but only %d bytes follow (truncated?)", src, n, total-8)
	}
	return int64(n), nil
}

// Parse parses a whole safetensors file held in memory. Tensor data alias data.
func Parse(data []byte) (*File, error) { return parse("<memory>", data) }

func parse(src string, data []byte) (*File, error) {
	n, err := headerLength(src, data, int64(len(data)))
	if err != nil {
		return nil, err
	}
	buf := data[8+n:]
	h, err := parseHeader(src, data[8:8+n], int64(len(buf)))
	if err != nil {
		return nil, err
	}
	f := &File{Metadata: h.Metadata}
	for _, e := range h.Entries {
		f.Tensors = append(f.Tensors, &Tensor{Name: e.Name, DType: e.DType, Shape: e.Shape, Data: buf[e.DataOffsets[0]:e.DataOffsets[1]:e.DataOffsets[1]]})
	}
	return f, nil
}

// ReadFile reads and validates a safetensors file.
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return parse(path, data)
}

// ReadHeader reads and validates only the header of a file, for streaming readers; the offsets are
// checked against the file size. Tensor e lies at absolute file offset
// h.DataOffset + e.DataOffsets[0].
func ReadHeader(path string) (*Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors %s: %w", path, err)
	}
	var prefix [8]byte
	k, _ := io.ReadFull(f, prefix[:])
	n, err := headerLength(path, prefix[:k], st.Size())
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, fmt.Errorf("safetensors %s: reading header: %w", path, err)
	}
	return parseHeader(path, hdr, st.Size()-8-n)
}

// EncodeHeader returns the header of the tensors described by entries, in buffer order, and
// metadata, as [Write] writes it: the JSON object padded with spaces to a multiple of 8 bytes,
// without the 8-byte length prefix. A writer that streams the byte buffer before it knows the
// shapes reserves room for the header and writes it last, padded with more spaces, which readers
// accept.
//
// The JSON is encoding/json's for the header as a map: keys sorted, strings escaped as
// json.Marshal escapes them.
//
// EncodeHeader returns an error for an empty, "__metadata__" or duplicate name, and for a shape
// whose size, by [ByteSize], is not the span of its data offsets.
func EncodeHeader(entries []HeaderEntry, metadata map[string]string) ([]byte, error) {
	return EncodeHeaderShared(entries, nil, metadata)
}

// SharedMetadata is metadata that many headers share, its JSON encoded once by
// [NewSharedMetadata] for [EncodeHeaderShared].
type SharedMetadata struct {
	pairs []encodedPair
}

// encodedPair is a key of a JSON object and its member as JSON, "key":value.
type encodedPair struct {
	key  string
	json []byte
}

// NewSharedMetadata encodes metadata's keys and values once.
func NewSharedMetadata(metadata map[string]string) *SharedMetadata {
	m := &SharedMetadata{}
	for k, v := range metadata {
		m.pairs = append(m.pairs, encodedPair{k, appendString(appendKey(nil, k), v)})
	}
	return m
}

// EncodeHeaderShared is [EncodeHeader] of the metadata shared (nil: none) and extra together, the
// same bytes, with shared's members copied from their encoding. It returns an error, besides
// EncodeHeader's, for a key both in shared and in extra.
func EncodeHeaderShared(entries []HeaderEntry, shared *SharedMetadata, extra map[string]string) ([]byte, error) {
	top := make([]encodedPair, 0, len(entries)+1)
	for _, e := range entries {
		if e.Name == "" || e.Name == "__metadata__" {
			return nil, fmt.Errorf("safetensors: invalid tensor name %q", e.Name)
		}
		if slices.ContainsFunc(top, func(p encodedPair) bool { return p.key == e.Name }) {
			return nil, fmt.Errorf("safetensors: duplicate tensor name %q", e.Name)
		}
		size, err := ByteSize(e.DType, e.Shape)
		if err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", e.Name, err)
		}
		if b, end := e.DataOffsets[0], e.DataOffsets[1]; b < 0 || end-b != int64(size) {
			return nil, fmt.Errorf("safetensors: tensor %q: shape %v of %s needs %d bytes, data_offsets [%d, %d]", e.Name, e.Shape, e.DType, size, b, end)
		}
		js := fmt.Appendf(appendKey(nil, e.Name), `{"data_offsets":[%d,%d],"dtype":`, e.DataOffsets[0], e.DataOffsets[1])
		js = append(appendString(js, string(e.DType)), `,"shape":[`...)
		for k, d := range e.Shape {
			if k > 0 {
				js = append(js, ',')
			}
			js = strconv.AppendInt(js, int64(d), 10)
		}
		top = append(top, encodedPair{e.Name, append(js, "]}"...)})
	}
	var md []encodedPair
	if shared != nil {
		md = slices.Clone(shared.pairs)
	}
	for k, v := range extra {
		if shared != nil && slices.ContainsFunc(shared.pairs, func(p encodedPair) bool { return p.key == k }) {
			return nil, fmt.Errorf("safetensors: metadata key %q given twice", k)
		}
		md = append(md, encodedPair{k, appendString(appendKey(nil, k), v)})
	}
	if len(md) > 0 {
		top = append(top, encodedPair{"__metadata__", appendObject(appendKey(nil, "__metadata__"), md)})
	}
	js := appendObject(nil, top)
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	return js, nil
}

// appendObject appends the JSON object of members, in the order of their keys, as encoding/json
// writes a map; it sorts members.
func appendObject(b []byte, members []encodedPair) []byte {
	slices.SortFunc(members, func(a, b encodedPair) int { return strings.Compare(a.key, b.key) })
	b = append(b, '{')
	for i, m := range members {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.json...)
	}
	return append(b, '}')
}

// appendKey appends "key": as encoding/json writes an object's key.
func appendKey(b []byte, key string) []byte { return append(appendString(b, key), ':') }

// appendString appends s as a JSON string, escaped as json.Marshal escapes it (HTML characters
// included; invalid UTF-8 becomes U+FFFD).
func appendString(b []byte, s string) []byte {
	js, _ := json.Marshal(s) // a string always encodes
	return append(b, js...)
}

// Write writes tensors and metadata. The tensors' order becomes the buffer order. Names must be
// unique and not "__metadata__".
func Write(w io.Writer, tensors []*Tensor, metadata map[string]string) error {
	entries := make([]HeaderEntry, len(tensors))
	var off int64
	for i, t := range tensors {
		if _, err := t.elements(); err != nil {
			return err
		}
		entries[i] = HeaderEntry{Name: t.Name, DType: t.DType, Shape: t.Shape, DataOffsets: [2]int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	js, err := EncodeHeader(entries, metadata)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(len(js)))
	bw.Write(prefix[:])
	bw.Write(js)
	for _, t := range tensors {
		bw.Write(t.Data)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: writing: %w", err)
	}
	return nil
}

// WriteFile writes a file atomically: a temporary file in the same directory
// is written, synced and renamed over path.
func WriteFile(path string, tensors []*Tensor, metadata map[string]string) error {
	if err := atomicfile.Write(path, func(w io.Writer) error { return Write(w, tensors, metadata) }); err != nil {
		return fmt.Errorf("safetensors %w", err)
	}
	return nil
}

var errDType = errors.New("dtype not convertible")

// elements returns the number of elements after checking that len(Data) is
// ByteSize(DType, Shape): the conversions and Write call it, so a hand-built
// Tensor with inconsistent fields is an error naming it, not a panic or a
// huge allocation.
func (t *Tensor) elements() (int, error) {
	want, err := ByteSize(t.DType, t.Shape)
	if err != nil {
		return 0, fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
	}
	if len(t.Data) != want {
		return 0, fmt.Errorf("safetensors: tensor %q: shape %v of %s needs %d bytes, has %d", t.Name, t.Shape, t.DType, want, len(t.Data))
	}
	return want / t.DType.Size(), nil
}

// Float32 converts F32, F16, BF16 or F64 data to float32.
func (t *Tensor) Float32() ([]float32, error) {
	n, err := t.elements()
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	d := t.Data
	switch t.DType {
	case F32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
		}
	case F64:
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))
		}
	case F16:
		for i := range out {
			out[i] = F16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
		}
	case BF16:
		for i := range out {
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(d[2*i:])) << 16)
		}
	default:
		return nil, fmt.Errorf("safetensors: tensor %q: %s to float32: %w", t.Name, t.DType, errDType)
	}
	return out, nil
}

// Float64 converts F64, F32, F16 or BF16 data to float64.
func (t *Tensor) Float64() ([]float64, error) {
	if t.DType == F64 {
		n, err := t.elements()
		if err != nil {
			return nil, err
		}
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
		return out, nil
	}
	f, err := t.Float32()
	if errors.Is(err, errDType) {
		return nil, fmt.Errorf("safetensors: tensor %q: %s to float64: %w", t.Name, t.DType, errDType)
	}
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out, nil
}

// Uint8 returns U8 or BOOL data.
func (t *Tensor) Uint8() ([]uint8, error) {
	if t.DType != U8 && t.DType != BOOL {
		return nil, fmt.Errorf("safetensors: tensor %q: %s to uint8: %w", t.Name, t.DType, errDType)
	}
	if _, err := t.elements(); err != nil {
		return nil, err
	}
	return append([]uint8(nil), t.Data...), nil
}

// Int64 converts I64, I32, I16, I8 or U8 data to int64.
func (t *Tensor) Int64() ([]int64, error) {
	n, err := t.elements()
	if err != nil {
		return nil, err
	}
	out := make([]int64, n)
	d := t.Data
	switch t.DType {
	case I64:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(d[8*i:]))
		}
	case I32:
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(d[4*i:])))
		}
	case I16:
		for i := range out {
			out[i] = int64(int16(binary.LittleEndian.Uint16(d[2*i:])))
		}
	case I8:
		for i := range out {
			out[i] = int64(int8(d[i]))
		}
	case U8:
		for i := range out {
			out[i] = int64(d[i])
		}
	default:
		return nil, fmt.Errorf("safetensors: tensor %q: %s to int64: %w", t.Name, t.DType, errDType)
	}
	return out, nil
}

func checkShape(name string, shape []int, n int) {
	p := 1
	for _, s := range shape {
		p *= s
	}
	if p != n {
		panic(fmt.Sprintf("safetensors: tensor %q: shape %v has %d elements, data has %d", name, shape, p, n))
	}
}

// FromFloat32 builds an F32 tensor. It panics if prod(shape) != len(data).
func FromFloat32(name string, shape []int, data []float32) *Tensor {
	checkShape(name, shape, len(data))
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return &Tensor{Name: name, DType: F32, Shape: append([]int{}, shape...), Data: b}
}

// FromFloat64 builds an F64 tensor. It panics if prod(shape) != len(data).
func FromFloat64(name string, shape []int, data []float64) *Tensor {
	checkShape(name, shape, len(data))
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return &Tensor{Name: name, DType: F64, Shape: append([]int{}, shape...), Data: b}
}

// FromUint8 builds a U8 tensor. It panics if prod(shape) != len(data).
func FromUint8(name string, shape []int, data []uint8) *Tensor {
	checkShape(name, shape, len(data))
	return &Tensor{Name: name, DType: U8, Shape: append([]int{}, shape...), Data: append([]byte{}, data...)}
}

// FromInt64 builds an I64 tensor. It panics if prod(shape) != len(data).
func FromInt64(name string, shape []int, data []int64) *Tensor {
	checkShape(name, shape, len(data))
	b := make([]byte, 8*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return &Tensor{Name: name, DType: I64, Shape: append([]int{}, shape...), Data: b}
}

// F16ToFloat32 converts an IEEE 754 half-precision value, given as bits, to float32 exactly,
// subnormals, infinities and NaN included.
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf / NaN
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: mant * 2^-24
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// Float32ToF16 converts a float32 to IEEE half precision with round-to-nearest-even.
func Float32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which rounds to inf correctly
	}
	return sign | uint16(r)
}
