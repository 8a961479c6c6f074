package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRoundTripAllDTypes(t *testing.T) {
	tensors := []*Tensor{
		FromFloat32("f32", []int{2, 3}, []float32{1, -2.5, 3.25, 0, float32(math.Inf(1)), 1e-30}),
		FromFloat64("f64", []int{3}, []float64{math.Pi, -1e300, 5e-324}),
		FromUint8("u8", []int{4}, []uint8{0, 1, 255, 7}),
		FromInt64("i64", []int{2, 1}, []int64{-1 << 62, 42}),
		{Name: "i32", DType: I32, Shape: []int{2}, Data: []byte{0xff, 0xff, 0xff, 0xff, 5, 0, 0, 0}},
		{Name: "i16", DType: I16, Shape: []int{1}, Data: []byte{0xfe, 0xff}},
		{Name: "i8", DType: I8, Shape: []int{1}, Data: []byte{0x80}},
		{Name: "bool", DType: BOOL, Shape: []int{2}, Data: []byte{1, 0}},
		{Name: "f16", DType: F16, Shape: []int{2}, Data: []byte{0x00, 0x3c, 0x00, 0xc0}}, // 1, -2
		{Name: "bf16", DType: BF16, Shape: []int{1}, Data: []byte{0x49, 0x40}},           // 3.140625
		{Name: "scalar", DType: F32, Shape: []int{}, Data: []byte{0, 0, 0x80, 0x3f}},
		{Name: "empty", DType: F32, Shape: []int{0, 3}, Data: []byte{}},
	}
	md := map[string]string{"prior_var": "1", "note": "round trip"}
	path := filepath.Join(t.TempDir(), "x.safetensors")
	if err := WriteFile(path, tensors, md); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header length %d not 8-aligned", n)
	}
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("got %d tensors, want %d", len(f.Tensors), len(tensors))
	}
	for i, want := range tensors {
		got, ok := f.Get(want.Name)
		if !ok {
			t.Fatalf("missing %q", want.Name)
		}
		if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%q: got %s %v %x, want %s %v %x", want.Name, got.DType, got.Shape, got.Data, want.DType, want.Shape, want.Data)
		}
		if f.Tensors[i].Name != want.Name { // written order = buffer order
			t.Errorf("tensor %d is %q, want %q", i, f.Tensors[i].Name, want.Name)
		}
	}
	if f.Metadata["prior_var"] != "1" || f.Metadata["note"] != "round trip" {
		t.Errorf("metadata %v", f.Metadata)
	}
	conv := []struct {
		name string
		want []float64
	}{
		{"f16", []float64{1, -2}},
		{"bf16", []float64{3.140625}},
		{"f32", []float64{1, -2.5, 3.25, 0, math.Inf(1), float64(float32(1e-30))}},
		{"f64", []float64{math.Pi, -1e300, 5e-324}},
		{"scalar", []float64{1}},
	}
	for _, c := range conv {
		tt, _ := f.Get(c.name)
		got, err := tt.Float64()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s Float64 = %v, want %v", c.name, got, c.want)
		}
	}
	ints := map[string][]int64{"i64": {-1 << 62, 42}, "i32": {-1, 5}, "i16": {-2}, "i8": {-128}, "u8": {0, 1, 255, 7}}
	for name, want := range ints {
		tt, _ := f.Get(name)
		got, err := tt.Int64()
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s Int64 = %v, %v; want %v", name, got, err, want)
		}
	}
	b, _ := f.Get("bool")
	if u, err := b.Uint8(); err != nil || !slices.Equal(u, []uint8{1, 0}) {
		t.Errorf("bool Uint8 = %v, %v", u, err)
	}
	u8, _ := f.Get("u8")
	if _, err := u8.Float32(); err == nil {
		t.Error("U8 converted to float32 without error")
	}
	f32, _ := f.Get("f32")
	if _, err := f32.Int64(); err == nil {
		t.Error("F32 converted to int64 without error")
	}
	if _, err := f32.Uint8(); err == nil {
		t.Error("F32 converted to uint8 without error")
	}
	h, err := ReadHeader(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Entries) != len(tensors) || h.DataOffset+h.BufferSize != int64(len(raw)) {
		t.Errorf("ReadHeader: %d entries, data offset %d + %d != %d", len(h.Entries), h.DataOffset, h.BufferSize, len(raw))
	}
}

func TestF16Conversion(t *testing.T) {
	cases := []struct {
		bits uint16
		want float32
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, 5.960464477539063e-08},
		{0x03ff, 6.097555160522461e-05}, {0x0400, 6.103515625e-05}, {0x3555, 0.333251953125},
		{0x7c00, float32(math.Inf(1))}, {0xfc00, float32(math.Inf(-1))}, {0x8000, float32(math.Copysign(0, -1))},
	}
	for _, c := range cases {
		got := F16ToFloat32(c.bits)
		if math.Float32bits(got) != math.Float32bits(c.want) {
			t.Errorf("F16ToFloat32(%#04x) = %g, want %g", c.bits, got, c.want)
		}
		if back := Float32ToF16(c.want); back != c.bits {
			t.Errorf("Float32ToF16(%g) = %#04x, want %#04x", c.want, back, c.bits)
		}
	}
	if v := F16ToFloat32(0x7e00); !math.IsNaN(float64(v)) {
		t.Errorf("NaN bits -> %g", v)
	}
	// Round to nearest even: 1 + 2^-11 is half way between 1 and 1+2^-10 -> 1.
	if b := Float32ToF16(1 + 1.0/2048); b != 0x3c00 {
		t.Errorf("tie rounding: %#04x", b)
	}
	if b := Float32ToF16(1e6); b != 0x7c00 {
		t.Errorf("overflow -> %#04x, want inf", b)
	}
	// Every finite half value survives float32 and back.
	for h := uint16(0); h < 0x7c00; h++ {
		if back := Float32ToF16(F16ToFloat32(h)); back != h {
			t.Fatalf("half %#04x -> %g -> %#04x", h, F16ToFloat32(h), back)
		}
	}
}

// build assembles a file from a header string and a buffer.
func build(header string, buf []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(header)))
	b.WriteString(header)
	b.Write(buf)
	return b.Bytes()
}

// goodFile is a valid one-tensor file; invalidFiles are files the reader must
// reject, each with a substring its error must contain. Both seed the fuzz
// corpus (FuzzParse).
var goodFile = build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8))

func invalidFiles() []invalidFile {
	good := goodFile
	return []invalidFile{
		{"short prefix", "shorter than the 8-byte", []byte{1, 2, 3}},
		{"huge header", "exceeds", binary.LittleEndian.AppendUint64(nil, 1<<40)},
		{"header past end", "truncated", binary.LittleEndian.AppendUint64(nil, 100)},
		{"truncated buffer", `tensor "a"`, good[:len(good)-1]},
		{"trailing bytes", "trailing", append(slices.Clone(good), 0)},
		{"bad json", "not a JSON object", build(`{"a":`, nil)},
		{"bad dtype", `unknown dtype "F8"`, build(`{"a":{"dtype":"F8","shape":[2],"data_offsets":[0,2]}}`, make([]byte, 2))},
		{"offsets out of range", "outside the 8-byte buffer", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, make([]byte, 8))},
		{"reversed offsets", "invalid data_offsets", build(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, make([]byte, 8))},
		{"overlap", "overlap", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8))},
		{"shape mismatch", "needs 12 bytes", build(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"negative shape", "invalid shape", build(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"bad metadata", "__metadata__", build(`{"__metadata__":{"k":1}}`, nil)},
		{"unknown field", "bad header entry", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, make([]byte, 8))},
		{"one offset", "2 entries", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}`, make([]byte, 8))},
		// prod(shape) * 8 = 2^61 * 8 wraps to 0 in int64: accepted before, then
		// Tensor.Float32 panicked in makeslice.
		{"byte size overflows", "overflows", build(`{"a":{"dtype":"F64","shape":[2147483648,1073741824],"data_offsets":[0,0]}}`, nil)},
		{"element count overflows", "overflows", build(`{"a":{"dtype":"U8","shape":[1099511627776,1099511627776,0],"data_offsets":[0,0]}}`, nil)},
		{"junk after the header JSON", "after the header JSON", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}junk`, make([]byte, 8))},
		{"second JSON value", "after the header JSON", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} {}`, make([]byte, 8))},
		{"newline padding", "after the header JSON", build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`+"\n", make([]byte, 8))},
		{"no leading brace", "begin with '{'", build(` {"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8))},
		{"not an object", "begin with '{'", build(`[1]`, nil)},
		{"invalid UTF-8", "UTF-8", build("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", make([]byte, 8))},
		{"gap between tensors", "gap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, make([]byte, 12))},
		{"gap before the first tensor", "gap", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8))},
		{"duplicate tensor", "duplicate key \"a\"", build(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8))},
		{"duplicate field", "duplicate key \"dtype\"", build(`{"a":{"dtype":"F64","dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4))},
		{"duplicate metadata key", "duplicate key \"k\"", build(`{"__metadata__":{"k":"1","k":"2"}}`, nil)},
		{"duplicate metadata", "duplicate key \"__metadata__\"", build(`{"__metadata__":{},"__metadata__":{}}`, nil)},
		{"missing shape", "shape is missing", build(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4))},
		{"null shape", "shape is missing", build(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, make([]byte, 4))},
		{"missing dtype", "dtype is missing", build(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4))},
		{"missing offsets", "data_offsets is missing", build(`{"a":{"dtype":"F32","shape":[1]}}`, make([]byte, 4))},
		{"offset beyond int64", "bad header entry", build(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,99999999999999999999]}}`, make([]byte, 1))},
		{"tensor entry not an object", "bad header entry", build(`{"a":[1,2]}`, nil)},
	}
}

type invalidFile struct {
	name, want string
	data       []byte
}

func TestValidationErrors(t *testing.T) {
	if _, err := Parse(goodFile); err != nil {
		t.Fatalf("good file rejected: %v", err)
	}
	cases := invalidFiles()
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error %v, want one containing %q", err, c.want)
			}
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
			os.WriteFile(path, c.data, 0o644)
			_, err = ReadFile(path)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ReadFile error %v, want one naming %s and containing %q", err, path, c.want)
			}
			if _, err := ReadHeader(path); err == nil && c.name != "bad json" {
				// Every case above is a header-level or size-level defect, so
				// the streaming reader must reject it too.
				t.Fatalf("ReadHeader accepted %s", c.name)
			}
		})
	}
}

func TestWriteRejects(t *testing.T) {
	var b bytes.Buffer
	bad := []*Tensor{
		{Name: "a", DType: F32, Shape: []int{2}, Data: make([]byte, 4)},
		{Name: "a", DType: "X", Shape: []int{1}, Data: make([]byte, 4)},
		{Name: "__metadata__", DType: U8, Shape: []int{1}, Data: []byte{1}},
	}
	for _, tt := range bad {
		if err := Write(&b, []*Tensor{tt}, nil); err == nil {
			t.Errorf("Write accepted %+v", tt)
		}
	}
	dup := []*Tensor{FromUint8("a", []int{1}, []uint8{1}), FromUint8("a", []int{1}, []uint8{1})}
	if err := Write(&b, dup, nil); err == nil {
		t.Error("duplicate names accepted")
	}
	// A failed WriteFile leaves neither the destination nor a temp file behind.
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "x.safetensors"), bad[:1], nil); err == nil {
		t.Error("WriteFile accepted a bad tensor")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("leftover files: %v", ents)
	}
}

// EncodeHeader is Write's header (Write's file starts with it), and a
// header padded with more spaces than the 8-byte alignment (the room a
// streaming writer reserves) still reads back; entries whose offsets do not
// span their shape, or with a bad name, are errors.
func TestEncodeHeader(t *testing.T) {
	a, b := FromFloat32("z", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}), FromUint8("m", []int{2}, []uint8{1, 0})
	md := map[string]string{"k": "v"}
	entries := []HeaderEntry{{Name: "z", DType: F32, Shape: []int{2, 3}, DataOffsets: [2]int64{0, 24}},
		{Name: "m", DType: U8, Shape: []int{2}, DataOffsets: [2]int64{24, 26}}}
	hdr, err := EncodeHeader(entries, md)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	if err := Write(&w, []*Tensor{a, b}, md); err != nil {
		t.Fatal(err)
	}
	if len(hdr)%8 != 0 || !bytes.Equal(w.Bytes()[8:8+len(hdr)], hdr) {
		t.Fatalf("EncodeHeader %q is not Write's header", hdr)
	}
	padded := append(append([]byte{}, hdr...), bytes.Repeat([]byte{' '}, 64)...)
	f, err := Parse(build(string(padded), w.Bytes()[8+len(hdr):]))
	if err != nil {
		t.Fatalf("header with 64 more spaces: %v", err)
	}
	if z, _ := f.Get("z"); z == nil || !slices.Equal(z.Shape, []int{2, 3}) || f.Metadata["k"] != "v" {
		t.Errorf("read back %+v", f)
	}
	for _, bad := range [][]HeaderEntry{
		{{Name: "z", DType: F32, Shape: []int{2, 3}, DataOffsets: [2]int64{0, 20}}},
		{{Name: "__metadata__", DType: U8, Shape: []int{1}, DataOffsets: [2]int64{0, 1}}},
		{entries[1], entries[1]},
		{{Name: "x", DType: "X", Shape: []int{1}, DataOffsets: [2]int64{0, 1}}},
	} {
		if _, err := EncodeHeader(bad, nil); err == nil {
			t.Errorf("EncodeHeader accepted %+v", bad)
		}
	}
}

// The fixture was written by /work/shared/bench/safetensors_io.py (numpy).
func TestPythonFixture(t *testing.T) {
	f, err := ReadFile("testdata/python_fixture.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	checkFixture(t, f)
}

func checkFixture(t *testing.T, f *File) {
	t.Helper()
	w, _ := f.Get("w")
	if got, err := w.Float32(); err != nil || !slices.Equal(got, []float32{1.5, -2.25, 0, 3, 1e-3, -7}) || !slices.Equal(w.Shape, []int{2, 3}) {
		t.Errorf("w = %v %v %v", got, w.Shape, err)
	}
	m, _ := f.Get("m")
	if got, _ := m.Uint8(); !slices.Equal(got, []uint8{0, 1, 1, 0}) {
		t.Errorf("m = %v", got)
	}
	ids, _ := f.Get("ids")
	if got, _ := ids.Int64(); !slices.Equal(got, []int64{-3, 1 << 40}) {
		t.Errorf("ids = %v", got)
	}
	d, _ := f.Get("d")
	if got, _ := d.Float64(); !slices.Equal(got, []float64{math.Pi}) {
		t.Errorf("d = %v", got)
	}
	i, _ := f.Get("i")
	if got, _ := i.Int64(); !slices.Equal(got, []int64{-1, 5}) || !slices.Equal(i.Shape, []int{1, 2}) {
		t.Errorf("i = %v %v", got, i.Shape)
	}
	if f.Metadata["prior_var"] != "1" || f.Metadata["task"] != "sst2" {
		t.Errorf("metadata = %v", f.Metadata)
	}
}

// Interop both ways with the numpy reader/writer when python3 + numpy exist.
func TestPythonInterop(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	const lib = "/work/shared/bench"
	if _, err := os.Stat(filepath.Join(lib, "safetensors_io.py")); err != nil {
		t.Skip("safetensors_io.py not available")
	}
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		t.Skip("numpy not available")
	}
	dir := t.TempDir()
	goPath := filepath.Join(dir, "go.safetensors")
	if err := WriteFile(goPath, []*Tensor{
		FromFloat32("x", []int{2, 2}, []float32{1, 2, 3, 4.5}),
		FromInt64("n", []int{1}, []int64{-9}),
	}, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	script := `import sys; sys.path.insert(0, sys.argv[1]); import safetensors_io as st, numpy as np
t, m = st.read(sys.argv[2])
assert t["x"].tolist() == [[1, 2], [3, 4.5]] and t["n"].tolist() == [-9] and m == {"k": "v"}, (t, m)
st.write(sys.argv[3], {"w": np.array([[1.5, -2.25, 0.0], [3.0, 1e-3, -7.0]], dtype=np.float32), "m": np.array([0, 1, 1, 0], dtype=np.uint8),
  "ids": np.array([-3, 2**40], dtype=np.int64), "d": np.array([np.pi]), "i": np.array([[-1, 5]], dtype=np.int32)}, {"prior_var": "1", "task": "sst2"})`
	pyPath := filepath.Join(dir, "py.safetensors")
	if out, err := exec.Command(py, "-c", script, lib, goPath, pyPath).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	f, err := ReadFile(pyPath)
	if err != nil {
		t.Fatal(err)
	}
	checkFixture(t, f)
}

// Layouts the format allows: empty tensors (at any offset, also several at
// one offset), scalars, space padding, keys in any order.
func TestValidLayouts(t *testing.T) {
	cases := []struct {
		name   string
		header string
		buf    int
		order  []string
	}{
		{"empty tensors share offsets", `{"z":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"e":{"dtype":"U8","shape":[3,0],"data_offsets":[4,4]},"f":{"dtype":"U8","shape":[0],"data_offsets":[4,4]}}`, 4, []string{"z", "a", "e", "f"}},
		{"space padding", `{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}    `, 8, []string{"s"}},
		{"no tensors", `{}`, 0, nil},
		{"metadata only", `{"__metadata__":{"k":"v"}}`, 0, nil},
		{"whitespace inside", "{ \"b\" : {\"dtype\":\"U8\",\n\"shape\":[2],\"data_offsets\":[1,3]}, \"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 3, []string{"a", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(build(c.header, make([]byte, c.buf)))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tt := range f.Tensors {
				got = append(got, tt.Name)
			}
			if !slices.Equal(got, c.order) {
				t.Fatalf("tensors %v, want %v", got, c.order)
			}
		})
	}
}

// Conversions check the data length against the shape, so a hand-built
// Tensor with inconsistent fields is an error, not a panic or a huge
// allocation.
func TestConversionRejectsInconsistentTensor(t *testing.T) {
	cases := []*Tensor{
		{Name: "short", DType: F32, Shape: []int{3}, Data: make([]byte, 8)},
		{Name: "huge", DType: F64, Shape: []int{1 << 31, 1 << 30}},
		{Name: "wraps", DType: U8, Shape: []int{1 << 62, 4}},
		{Name: "negative", DType: F32, Shape: []int{-1}},
	}
	for _, tt := range cases {
		for what, conv := range map[string]func() error{
			"Float32": func() error { _, err := tt.Float32(); return err },
			"Float64": func() error { _, err := tt.Float64(); return err },
			"Int64":   func() error { _, err := tt.Int64(); return err },
			"Uint8":   func() error { _, err := tt.Uint8(); return err },
		} {
			if err := conv(); err == nil || !strings.Contains(err.Error(), tt.Name) {
				t.Errorf("%s.%s: error %v, want one naming the tensor", tt.Name, what, err)
			}
		}
		var b bytes.Buffer
		if err := Write(&b, []*Tensor{tt}, nil); err == nil {
			t.Errorf("Write accepted %s", tt.Name)
		}
	}
}

// encodeHeaderMap is EncodeHeader as it was written before the encoder wrote its JSON by hand:
// json.Marshal of the header as a map (entries assumed valid).
func encodeHeaderMap(entries []HeaderEntry, metadata map[string]string) []byte {
	hdr := map[string]any{}
	for _, e := range entries {
		shape := e.Shape
		if shape == nil {
			shape = []int{}
		}
		hdr[e.Name] = map[string]any{"dtype": e.DType, "shape": shape, "data_offsets": e.DataOffsets}
	}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	js, _ := json.Marshal(hdr)
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	return js
}

// headerCase builds valid entries and metadata from a fuzzer's bytes: names and metadata from
// pieces that sort around "__metadata__" and need escaping (HTML characters, quotes, control
// characters, invalid UTF-8), shapes of 0-3 dimensions.
func headerCase(data []byte) ([]HeaderEntry, map[string]string) {
	pieces := []string{"z", "pi", "A", "_", "__metadata_", "__metadatb__", "<", "&", ">", "\"", "\\", "\n", "\x01", "é", "\xff", "\u2028", "x y", "0"}
	next := func() int {
		if len(data) == 0 {
			return 0
		}
		v := int(data[0])
		data = data[1:]
		return v
	}
	word := func() string {
		var s string
		for range 1 + next()%3 {
			s += pieces[next()%len(pieces)]
		}
		return s
	}
	var entries []HeaderEntry
	var off int64
	for range next() % 4 {
		name := word()
		if name == "__metadata__" || slices.ContainsFunc(entries, func(e HeaderEntry) bool { return e.Name == name }) {
			continue
		}
		shape := make([]int, next()%4)
		for i := range shape {
			shape[i] = next() % 5
		}
		size, _ := ByteSize(F32, shape)
		entries = append(entries, HeaderEntry{Name: name, DType: F32, Shape: shape, DataOffsets: [2]int64{off, off + int64(size)}})
		off += int64(size)
	}
	md := map[string]string{}
	for range next() % 5 {
		md[word()] = word()
	}
	return entries, md
}

// TestEncodeHeaderSameAsMap: the hand-written JSON of EncodeHeader and EncodeHeaderShared (the
// metadata split between shared and extra keys) is byte for byte json.Marshal's of the header
// as a map, over random headers.
func TestEncodeHeaderSameAsMap(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for range 3000 {
		data := make([]byte, 40)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		checkHeaderSameAsMap(t, data)
	}
}

func FuzzEncodeHeader(f *testing.F) {
	f.Add([]byte{2, 0, 1, 2, 3, 1, 1, 2, 3, 4, 5, 6})
	f.Fuzz(func(t *testing.T, data []byte) { checkHeaderSameAsMap(t, data) })
}

func checkHeaderSameAsMap(t *testing.T, data []byte) {
	entries, md := headerCase(data)
	want := encodeHeaderMap(entries, md)
	got, err := EncodeHeader(entries, md)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EncodeHeader(%+v, %q) = %q, %v; json.Marshal gives %q", entries, md, got, err, want)
	}
	shared, extra := map[string]string{}, map[string]string{}
	for k, v := range md {
		if len(k)%2 == 0 {
			shared[k] = v
		} else {
			extra[k] = v
		}
	}
	got, err = EncodeHeaderShared(entries, NewSharedMetadata(shared), extra)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("EncodeHeaderShared(%+v, %q, %q) = %q, %v; json.Marshal gives %q", entries, shared, extra, got, err, want)
	}
	if len(shared) > 0 {
		for k := range shared {
			extra[k] = "again"
			break
		}
		if _, err := EncodeHeaderShared(entries, NewSharedMetadata(shared), extra); err == nil {
			t.Fatalf("EncodeHeaderShared accepted a key both shared and extra: %q, %q", shared, extra)
		}
	}
}
