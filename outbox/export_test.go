package outbox

// Wake exposes wakeRelay to the external tests: Run looks for due rows now.
func (o *Outbox) Wake() { o.wakeRelay() }
