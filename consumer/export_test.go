package consumer

// Combine exposes combine, the folding of a batch's outcomes, to the external tests.
var Combine = combine

// ZSTDDecoder exposes the consumer's shared ZSTD decoder to the external tests and benchmarks.
type ZSTDDecoder = zstdDecoder

// Decode decodes a whole ZSTD body with the shared decoder.
func (z *ZSTDDecoder) Decode(body []byte) ([]byte, error) { return z.decode(body) }

// Close frees the shared decoder.
func (z *ZSTDDecoder) Close() { z.close() }
