package dnn

// SetNormBlocks sets the most blocks of GradNorm's first stage per
// parameter and returns the function that restores it (tests only).
func SetNormBlocks(n int) (restore func()) {
	old := normBlocks
	normBlocks = n
	return func() { normBlocks = old }
}
