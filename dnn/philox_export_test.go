package dnn

import "github.com/nvdp-project/nvdp/cuda"

// PhiloxBlocksOnDevice runs the kernel philox_blocks: in holds per block
// the counter (4 words) and the key (2 words); it returns the 4 output
// words per block.
func PhiloxBlocksOnDevice(e *Engine, in []uint32) []uint32 {
	n := len(in) / 6
	src := e.arena.alloc(4 * max(1, len(in)))
	must(cuda.Upload(e.Dev, src, in))
	dst := e.arena.alloc(16 * max(1, n))
	e.launch1D("philox_blocks", n, dst, src, n)
	out := make([]uint32, 4*n)
	must(cuda.Download(e.Dev, out, dst))
	return out
}

// PhiloxDrawsOnDevice returns draws g.Pos .. g.Pos+n-1 of g's stream as the
// kernels compute them (philox_u64), advancing g.Pos by n.
func PhiloxDrawsOnDevice(e *Engine, g *Philox, n int) []uint64 {
	pos := g.take(n)
	dst := e.arena.alloc(8 * max(1, n))
	k0, k1 := g.keys()
	e.launch1D("philox_draws", n, dst, k0, k1, pos, n)
	w := make([]uint32, 2*n)
	must(cuda.Download(e.Dev, w, dst))
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(w[2*i]) | uint64(w[2*i+1])<<32
	}
	return out
}

// PhiloxBlock is philoxBlock, for the external tests.
func PhiloxBlock(ctr [4]uint32, key [2]uint32) [4]uint32 { return philoxBlock(ctr, key) }
