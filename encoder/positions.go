package encoder

// PositionIDs returns the position ids [B*S] that Forward gives the position embeddings for in:
// 0..S-1 per row for BERT, and for RoBERTa positions offset by padding_idx. The device twin,
// dnn.Encoder, uses it to look up the same rows.
func (e *Encoder) PositionIDs(in Input) []int32 { return e.positionIDs(in) }
