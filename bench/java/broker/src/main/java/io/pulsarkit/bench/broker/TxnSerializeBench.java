package io.pulsarkit.bench.broker;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.common.allocator.PulsarByteBufAllocator;
import org.apache.pulsar.transaction.coordinator.impl.TxnLogBufferedWriter;
import org.apache.pulsar.transaction.coordinator.proto.TransactionMetadataEntry;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The packing step of PIP-160 alone, the counterpart of pulsarkit's {@code _native.pack_batched_txn_entry}: what
 * {@code TxnLogBufferedWriter.doFlush} builds for each batch of the records of txn/records.bin (cut at
 * batchedWriteMaxRecords): a 4-byte prefix buffer (magic 0x0e01, version 1) and the coordinator serializer's
 * {@code serialize(ArrayList)} (a BatchedTransactionMetadataEntry filled with copies of the records, then written to a
 * pooled buffer), joined by {@code Unpooled.wrappedUnmodifiableBuffer}. One operation packs every batch.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class TxnSerializeBench {
    @Param("")
    public String data;

    private TxnLogBufferedWriter.DataSerializer<TransactionMetadataEntry> serializer;
    private List<ArrayList<TransactionMetadataEntry>> batches;

    @Setup
    public void setup() throws Exception {
        TxnInputs in = new TxnInputs(data);
        serializer = in.serializer;
        batches = in.batches();
        List<byte[]> got = new ArrayList<>();
        for (ArrayList<TransactionMetadataEntry> b : batches) {
            ByteBuf entry = pack(b);
            got.add(TxnInputs.bytes(entry));
            entry.release();
        }
        in.checkEntries("TxnSerializeBench", got);
        Data.check("bytes packed", in.expectedBytes, pack());
    }

    private ByteBuf pack(ArrayList<TransactionMetadataEntry> batch) {
        ByteBuf prefix = PulsarByteBufAllocator.DEFAULT.buffer(4);
        prefix.writeShort(TxnLogBufferedWriter.BATCHED_ENTRY_DATA_PREFIX_MAGIC_NUMBER);
        prefix.writeShort(TxnLogBufferedWriter.BATCHED_ENTRY_DATA_PREFIX_VERSION);
        return Unpooled.wrappedUnmodifiableBuffer(prefix, serializer.serialize(batch));
    }

    @Benchmark
    public long pack() {
        long bytes = 0;
        for (ArrayList<TransactionMetadataEntry> b : batches) {
            ByteBuf entry = pack(b);
            bytes += entry.readableBytes();
            entry.release();
        }
        return bytes;
    }
}
