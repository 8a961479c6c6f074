// Package safetensors reads and writes Hugging Face safetensors files.
//
// Format (https://huggingface.co/docs/safetensors): an 8-byte little-endian
// unsigned header length N, then N bytes of UTF-8 JSON
//
//	{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//	 "__metadata__": {"key": "value"}}
//
// then the byte buffer. Offsets are relative to the start of the buffer, tensor
// data are row-major and little-endian. The reader validates everything it
// relies on (header length, JSON, dtypes, offsets inside the buffer, no overlap,
// byte sizes = prod(shape) * dtype size, file not truncated) and names the file
// and the tensor in every error. The writer pads the header with spaces to an
// 8-byte boundary, as the reference implementation does, and WriteFile replaces
// the destination atomically.
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
	"sort"

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

// MaxHeaderSize bounds the JSON header length accepted by the reader (100 MB,
// as the reference implementation).
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

// Tensor is one named tensor. Data holds the raw little-endian bytes,
// len(Data) = NumElements() * DType.Size().
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// File is a parsed safetensors file. Tensors are in buffer order (sorted by
// data offset).
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

// NumElements is the product of the shape (1 for a scalar with shape []).
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
	Entries    []HeaderEntry // sorted by begin offset
	DataOffset int64         // absolute file offset of the byte buffer (8 + header length)
	BufferSize int64         // byte buffer size the header requires (max end offset)
}

type rawEntry struct {
	DType       DType   `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// parseHeader validates the JSON header. bufSize < 0 skips the "inside the
// buffer" check (streaming readers check it against the file size).
func parseHeader(src string, hdr []byte, bufSize int64) (*Header, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
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
		var e rawEntry
		d := json.NewDecoder(bytes.NewReader(msg))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, fmt.Errorf("safetensors %s: tensor %q: bad header entry: %w", src, name, err)
		}
		if e.DType.Size() == 0 {
			return nil, fmt.Errorf("safetensors %s: tensor %q: unknown dtype %q", src, name, e.DType)
		}
		if len(e.DataOffsets) != 2 {
			return nil, fmt.Errorf("safetensors %s: tensor %q: data_offsets must have 2 entries, has %d", src, name, len(e.DataOffsets))
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin {
			return nil, fmt.Errorf("safetensors %s: tensor %q: invalid data_offsets [%d, %d]", src, name, begin, end)
		}
		n := int64(1)
		shape := make([]int, len(e.Shape))
		for i, s := range e.Shape {
			if s < 0 || s > math.MaxInt32*int64(1024) {
				return nil, fmt.Errorf("safetensors %s: tensor %q: invalid shape %v", src, name, e.Shape)
			}
			shape[i] = int(s)
			if s != 0 && n > math.MaxInt64/s {
				return nil, fmt.Errorf("safetensors %s: tensor %q: shape %v overflows", src, name, e.Shape)
			}
			n *= s
		}
		if want := n * int64(e.DType.Size()); end-begin != want {
			return nil, fmt.Errorf("safetensors %s: tensor %q: shape %v of %s needs %d bytes, data_offsets [%d, %d] span %d",
				src, name, shape, e.DType, want, begin, end, end-begin)
		}
		if bufSize >= 0 && end > bufSize {
			return nil, fmt.Errorf("safetensors %s: tensor %q: data_offsets [%d, %d] outside the %d-byte buffer (file truncated?)",
				src, name, begin, end, bufSize)
		}
		h.Entries = append(h.Entries, HeaderEntry{Name: name, DType: e.DType, Shape: shape, DataOffsets: [2]int64{begin, end}})
	}
	sort.Slice(h.Entries, func(i, j int) bool {
		a, b := h.Entries[i].DataOffsets, h.Entries[j].DataOffsets
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		return a[1] < b[1]
	})
	for i := 1; i < len(h.Entries); i++ {
		p, c := h.Entries[i-1], h.Entries[i]
		if c.DataOffsets[0] < p.DataOffsets[1] {
			return nil, fmt.Errorf("safetensors %s: tensors %q [%d, %d] and %q [%d, %d] overlap",
				src, p.Name, p.DataOffsets[0], p.DataOffsets[1], c.Name, c.DataOffsets[0], c.DataOffsets[1])
		}
	}
	for _, e := range h.Entries {
		h.BufferSize = max(h.BufferSize, e.DataOffsets[1])
	}
	h.DataOffset = 8 + int64(len(hdr))
	return h, nil
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
	if h.BufferSize != int64(len(buf)) {
		return nil, fmt.Errorf("safetensors %s: %d trailing bytes after the last tensor", src, int64(len(buf))-h.BufferSize)
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

// ReadHeader reads and validates only the header of a file (offsets are
// checked against the file size), for streaming readers: tensor e lies at
// absolute file offset h.DataOffset + e.DataOffsets[0].
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
	h, err := parseHeader(path, hdr, st.Size()-8-n)
	if err != nil {
		return nil, err
	}
	if h.BufferSize != st.Size()-8-n {
		return nil, fmt.Errorf("safetensors %s: %d trailing bytes after the last tensor", path, st.Size()-8-n-h.BufferSize)
	}
	return h, nil
}

// Write writes tensors (in the given order, which becomes the buffer order)
// and metadata. Names must be unique and not "__metadata__".
func Write(w io.Writer, tensors []*Tensor, metadata map[string]string) error {
	hdr := map[string]any{}
	var off int64
	for _, t := range tensors {
		if t.Name == "" || t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: invalid tensor name %q", t.Name)
		}
		if _, dup := hdr[t.Name]; dup {
			return fmt.Errorf("safetensors: duplicate tensor name %q", t.Name)
		}
		if t.DType.Size() == 0 {
			return fmt.Errorf("safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		for _, s := range t.Shape {
			if s < 0 {
				return fmt.Errorf("safetensors: tensor %q: negative dimension in shape %v", t.Name, t.Shape)
			}
		}
		if want := t.NumElements() * t.DType.Size(); len(t.Data) != want {
			return fmt.Errorf("safetensors: tensor %q: shape %v of %s needs %d bytes, has %d", t.Name, t.Shape, t.DType, want, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": [2]int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("safetensors: encoding header: %w", err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
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

// Float32 converts F32, F16, BF16 or F64 data to float32.
func (t *Tensor) Float32() ([]float32, error) {
	n := t.NumElements()
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
		out := make([]float64, t.NumElements())
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
		return out, nil
	}
	f, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("safetensors: tensor %q: %s to float64: %w", t.Name, t.DType, errDType)
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
	return append([]uint8(nil), t.Data...), nil
}

// Int64 converts I64, I32, I16, I8 or U8 data to int64.
func (t *Tensor) Int64() ([]int64, error) {
	n := t.NumElements()
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

// F16ToFloat32 converts an IEEE 754 half-precision value (bits) to float32,
// exactly (subnormals, infinities and NaN included).
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
