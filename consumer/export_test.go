package consumer

// Combine exposes combine, the folding of a batch's outcomes, to the external tests.
var Combine = combine
