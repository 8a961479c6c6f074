package dnn

// DLogG returns d ln g/d alpha' [B*N] of the draw (tests compare it with
// nvib.GammaLogGrad).
func (d *NVIBDirichlet) DLogG(e *Engine) []float64 { return e.downloadF64(d.dlogG) }

// LogG returns the ln-Gamma draws [B*N] of the draw.
func (d *NVIBDirichlet) LogG(e *Engine) []float64 { return e.downloadF64(d.logG) }
