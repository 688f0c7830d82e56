// Package body decodes the bodies of RocketMQ messages that the Go client leaves compressed: a Java 5.x
// producer's LZ4 or ZSTD body, and a zlib body the client did not inflate. It imports no other package of
// this module.
//
// SysFlag bits describe a compressed body as the Java client (4.x and 5.x) and the broker write them: the
// compressed flag, and in bits 8–10 the codec. The Java 5.x producer sets the codec of its compressType
// (default zlib); 4.x producers and the Go producer set none (0), which means zlib. A body still compressed
// when rmqguard dead-letters it keeps its SysFlag in the PropSysFlag property, since the Go producer cannot
// set a message's SysFlag; consumers honour the property on a message whose own SysFlag says nothing (a
// replayed letter), and operators read the codec from it.
//
// Decoding is bounded: at most MaxDecoded bytes (64 MiB; a larger body is corrupt, the broker's own limit
// for a stored message is 4 MiB by default), and a ZSTD frame may declare a window of at most 128 MiB. The
// bound covers only the bodies decoded here (LZ4, ZSTD, and zlib the client left as stored): a zlib body
// the client inflates (the usual case) is inflated by rocketmq-client-go before rmqguard sees it, without
// any limit. A body that does not decode is dead-lettered at once by the consumer: no redelivery decodes
// it better.
package body
