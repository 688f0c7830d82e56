package dedup

// DoubtSinceBegin exposes whether txn's tracked connection has a doubt (see trackedConn) to the tests.
func DoubtSinceBegin(txn *Txn) bool { return txn.doubtSinceBegin() }

// SavepointName exposes sp's SQL name to the tests.
func SavepointName(sp Savepoint) string { return sp.name }
