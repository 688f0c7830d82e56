package dedup

// DoubtSinceBegin exposes whether txn's tracked connection has a doubt (see trackedConn) to the tests.
func DoubtSinceBegin(txn *Txn) bool { return txn.doubtSinceBegin() }
