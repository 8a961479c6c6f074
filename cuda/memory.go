package cuda

import (
	"fmt"
	"unsafe"
)

// Buffer is a device allocation: Ptr is its device address, Bytes its
// size. The zero Buffer is no allocation.
type Buffer struct {
	Ptr   uintptr
	Bytes int
}

// Floats returns the number of float32 values the buffer holds.
func (b Buffer) Floats() int { return b.Bytes / 4 }

// Offset returns the part of b from byte off on. It is a view, not to be freed.
func (b Buffer) Offset(off int) Buffer {
	if off < 0 || off > b.Bytes {
		panic(fmt.Sprintf("cuda: offset %d of a %d-byte buffer", off, b.Bytes))
	}
	return Buffer{Ptr: b.Ptr + uintptr(off), Bytes: b.Bytes - off}
}

// Alloc allocates bytes of device memory; bytes must be positive. It runs on the device goroutine.
// It returns the driver's error; out of memory names the size.
func (d *Device) Alloc(bytes int) (Buffer, error) {
	if bytes <= 0 {
		panic(fmt.Sprintf("cuda: Alloc of %d bytes", bytes))
	}
	var p uintptr
	if err := d.a.check("cuMemAlloc_v2", d.a.cuMemAlloc(&p, uint64(bytes))); err != nil {
		return Buffer{}, fmt.Errorf("allocating %d bytes: %w", bytes, err)
	}
	return Buffer{Ptr: p, Bytes: bytes}, nil
}

// Free releases b. It runs on the device goroutine. Freeing the zero Buffer does nothing.
func (d *Device) Free(b Buffer) error {
	if b.Ptr == 0 {
		return nil
	}
	return d.a.check("cuMemFree_v2", d.a.cuMemFree(b.Ptr))
}

// checkSize panics when n bytes do not fit in b (a programmer error).
func checkSize(op string, b Buffer, n int) {
	if n > b.Bytes {
		panic(fmt.Sprintf("cuda: %s of %d bytes into a %d-byte buffer", op, n, b.Bytes))
	}
}

// Upload copies src into the start of dst. It runs on the device goroutine.
func Upload[T float32 | int32 | uint32 | float64 | uint64 | uint16](d *Device, dst Buffer, src []T) error {
	if len(src) == 0 {
		return nil
	}
	n := len(src) * int(unsafe.Sizeof(src[0]))
	checkSize("upload", dst, n)
	d.uploads.Add(1)
	return d.a.check("cuMemcpyHtoD_v2", d.a.cuMemcpyHtoD(dst.Ptr, unsafe.Pointer(&src[0]), uint64(n)))
}

// Download copies the start of src into dst. It runs on the device goroutine and waits for the work
// queued before it.
func Download[T float32 | int32 | uint32 | float64 | uint64 | uint16](d *Device, dst []T, src Buffer) error {
	if len(dst) == 0 {
		return nil
	}
	n := len(dst) * int(unsafe.Sizeof(dst[0]))
	checkSize("download", src, n)
	d.downloads.Add(1)
	return d.a.check("cuMemcpyDtoH_v2", d.a.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), src.Ptr, uint64(n)))
}

// Copy copies bytes from src to dst on the device. It runs on the device goroutine.
func (d *Device) Copy(dst, src Buffer, bytes int) error {
	if bytes == 0 {
		return nil
	}
	checkSize("copy", dst, bytes)
	checkSize("copy", src, bytes)
	d.copies.Add(1)
	return d.a.check("cuMemcpyDtoD_v2", d.a.cuMemcpyDtoD(dst.Ptr, src.Ptr, uint64(bytes)))
}

// Zero sets the first bytes of b to 0; bytes must be a multiple of 4. It runs on the device
// goroutine.
func (d *Device) Zero(b Buffer, bytes int) error {
	if bytes%4 != 0 {
		panic(fmt.Sprintf("cuda: Zero of %d bytes, not a multiple of 4", bytes))
	}
	if bytes == 0 {
		return nil
	}
	checkSize("zero", b, bytes)
	d.memsets.Add(1)
	return d.a.check("cuMemsetD32_v2", d.a.cuMemsetD32(b.Ptr, 0, uint64(bytes/4)))
}
