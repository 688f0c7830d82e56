package body

// DecodeZSTD decodes a whole ZSTD body with the shared decoder, for the external tests and benchmarks.
func (z *Decoder) DecodeZSTD(b []byte) ([]byte, error) { return z.zstd(b) }
