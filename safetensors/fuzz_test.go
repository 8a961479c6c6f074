package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the reader. An accepted file must satisfy
// what the format promises: the tensors tile the byte buffer in order, every
// conversion either works or reports errDType, and writing the tensors back
// gives a file that parses to the same tensors. Seeds: the valid and invalid
// files of the tests (overflowing shapes, junk after the header, gaps,
// duplicate keys, ...), a file with every dtype and the Python fixture.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 60s ./safetensors
func FuzzParse(f *testing.F) {
	f.Add(goodFile)
	for _, c := range invalidFiles() {
		f.Add(c.data)
	}
	var b bytes.Buffer
	if err := Write(&b, []*Tensor{
		FromFloat32("f32", []int{2}, []float32{1, -2}),
		FromFloat64("f64", []int{1}, []float64{3}),
		FromInt64("i64", []int{1, 1}, []int64{-4}),
		FromUint8("u8", []int{0}, nil),
		{Name: "f16", DType: F16, Shape: []int{}, Data: []byte{0, 0x3c}},
		{Name: "bf16", DType: BF16, Shape: []int{1}, Data: []byte{0x49, 0x40}},
		{Name: "i32", DType: I32, Shape: []int{1}, Data: []byte{1, 0, 0, 0}},
		{Name: "bool", DType: BOOL, Shape: []int{1}, Data: []byte{1}},
	}, map[string]string{"k": "v"}); err != nil {
		f.Fatal(err)
	}
	f.Add(b.Bytes())
	if fixture, err := os.ReadFile("testdata/python_fixture.safetensors"); err == nil {
		f.Add(fixture)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		off := 8 + int(binary.LittleEndian.Uint64(data))
		named := true
		for _, tt := range file.Tensors {
			if !bytes.Equal(tt.Data, data[off:off+len(tt.Data)]) {
				t.Fatalf("tensor %q is not the buffer at %d", tt.Name, off)
			}
			off += len(tt.Data)
			named = named && tt.Name != ""
			for _, conv := range []func() error{
				func() error { _, err := tt.Float32(); return err },
				func() error { _, err := tt.Float64(); return err },
				func() error { _, err := tt.Int64(); return err },
				func() error { _, err := tt.Uint8(); return err },
			} {
				if err := conv(); err != nil && !errors.Is(err, errDType) {
					t.Fatalf("tensor %q: conversion of an accepted tensor failed: %v", tt.Name, err)
				}
			}
		}
		if off != len(data) {
			t.Fatalf("tensors end at %d of %d bytes", off, len(data))
		}
		if !named { // Write refuses an empty name (a programmer error there)
			return
		}
		var out bytes.Buffer
		if err := Write(&out, file.Tensors, file.Metadata); err != nil {
			t.Fatalf("writing an accepted file back: %v", err)
		}
		back, err := Parse(out.Bytes())
		if err != nil {
			t.Fatalf("re-reading a written file: %v", err)
		}
		if len(back.Tensors) != len(file.Tensors) || len(back.Metadata) != len(file.Metadata) {
			t.Fatalf("round trip: %d tensors, %d metadata; want %d, %d", len(back.Tensors), len(back.Metadata), len(file.Tensors), len(file.Metadata))
		}
		for i, tt := range file.Tensors {
			g := back.Tensors[i]
			if g.Name != tt.Name || g.DType != tt.DType || !slices.Equal(g.Shape, tt.Shape) || !bytes.Equal(g.Data, tt.Data) {
				t.Fatalf("round trip: tensor %d is %q %s %v, want %q %s %v", i, g.Name, g.DType, g.Shape, tt.Name, tt.DType, tt.Shape)
			}
		}
		for k, v := range file.Metadata {
			if back.Metadata[k] != v {
				t.Fatalf("round trip: metadata %q = %q, want %q", k, back.Metadata[k], v)
			}
		}
	})
}
