//go:build linux

package cuda

import "github.com/ebitengine/purego"

// Library is a library to load, for the tests of the error path.
type Library struct {
	What    string
	Sonames []string
}

// TryLoad tries to load l as the backend loads its libraries.
func TryLoad(l Library) error {
	_, err := library{what: l.What, sonames: l.Sonames}.open()
	return err
}

// The pure functions of the libraries' choice, for their tests.
var (
	ChooseMajors  = chooseMajors
	NVRTCBuiltins = nvrtcBuiltins
	BuiltinsHint  = builtinsHint
)

// LibrarySonames returns the sonames that the backend tries for cuBLAS and
// NVRTC of the CUDA major versions majors, in order.
func LibrarySonames(majors []int) (blas, nvrtc []string) {
	return blasLibrary(majors, "", 0).sonames, nvrtcLibrary(majors, "", 0).sonames
}

// Preloads returns the paths the backend loads from dir before cuBLAS and
// NVRTC of CUDA major version major found there.
func Preloads(dir string, major int) (blas, nvrtc []string) {
	return blasLibrary([]int{major}, "", 0).before(dir, major), nvrtcLibrary([]int{major}, "", 0).before(dir, major)
}

// BindBF16From binds the BF16 GEMM functions from the library at path, as
// the backend does from cuBLAS: the error names the functions missing.
func BindBF16From(path string) error {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return err
	}
	a := &api{}
	return bindOptional(h, "cuBLAS", path, map[string]any{
		"cublasGemmEx": &a.cublasGemmEx, "cublasGemmStridedBatchedEx": &a.cublasGemmStridedBatchedEx,
	})
}
