package org.apache.bookkeeper.bookie;

// Test oracle for pulsarkit: BookKeeper's own DefaultEntryLogger, DirectEntryLogger and DigestManager
// behind a JSON-lines protocol (see tests/oracle.py). It lives in BookKeeper's package to reach the
// package-private pieces its own tests use (forced rollover, reading the ledgers map without fallback).

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.buffer.UnpooledByteBufAllocator;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.apache.bookkeeper.bookie.storage.EntryLogScanner;
import org.apache.bookkeeper.bookie.storage.EntryLogger;
import org.apache.bookkeeper.bookie.storage.directentrylogger.DirectEntryLogger;
import org.apache.bookkeeper.bookie.storage.directentrylogger.EntryLogIdsImpl;
import org.apache.bookkeeper.bookie.storage.ldb.DbLedgerStorageDataFormats;
import org.apache.bookkeeper.bookie.storage.ldb.KeyValueStorage;
import org.apache.bookkeeper.bookie.storage.ldb.KeyValueStorageFactory;
import org.apache.bookkeeper.bookie.storage.ldb.KeyValueStorageRocksDB;
import org.apache.bookkeeper.client.api.LedgerMetadata;
import org.apache.bookkeeper.meta.LedgerMetadataSerDe;
import org.apache.bookkeeper.net.BookieId;
import org.apache.bookkeeper.common.util.nativeio.NativeIOImpl;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.bookkeeper.proto.DataFormats.LedgerMetadataFormat.DigestType;
import org.apache.bookkeeper.proto.checksum.DigestManager;
import org.apache.bookkeeper.slogger.Slogger;
import org.apache.bookkeeper.stats.NullStatsLogger;
import org.apache.bookkeeper.util.ByteBufList;
import org.apache.bookkeeper.util.DiskChecker;

public final class Oracle {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        // stdout carries responses only; anything the libraries print goes to stderr.
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode req = JSON.readTree(line);
            String op = req.path("op").asText();
            if (op.equals("stop")) {
                break;
            }
            ObjectNode resp = JSON.createObjectNode();
            resp.set("id", req.get("id"));
            try {
                resp.set("result", handle(op, req));
                resp.put("ok", true);
            } catch (Throwable t) {
                t.printStackTrace(System.err);
                resp.put("ok", false);
                resp.put("error", t.getClass().getName());
                resp.put("message", String.valueOf(t.getMessage()));
            }
            out.println(JSON.writeValueAsString(resp));
        }
    }

    private static JsonNode handle(String op, JsonNode r) throws Exception {
        switch (op) {
            case "info": {
                ObjectNode o = JSON.createObjectNode();
                Package p = DefaultEntryLogger.class.getPackage();
                o.put("bookkeeper", p.getImplementationVersion());
                o.put("jar", DefaultEntryLogger.class.getProtectionDomain().getCodeSource().getLocation().toString());
                return o;
            }
            case "defaultWrite":
                return defaultWrite(r);
            case "defaultRead":
                return defaultRead(r);
            case "defaultScan":
                return defaultScan(r);
            case "defaultMetadata":
                return defaultMetadata(r);
            case "directWrite":
                return directWrite(r);
            case "digestPack":
                return digestPack(r);
            case "digestVerify":
                return digestVerify(r);
            case "dbIndexDump":
                return dbIndexDump(r);
            case "ledgerMetadataParse":
                return ledgerMetadataParse(r);
            case "journalScan":
                return journalScan(r);
            case "defaultScanAll":
                return defaultScanAll(r);
            default:
                throw new IllegalArgumentException("unknown op " + op);
        }
    }

    private static byte[] hex(JsonNode n) {
        return ByteBufUtil.decodeHexDump(n.asText());
    }

    private static String hex(ByteBuf b) {
        return ByteBufUtil.hexDump(b);
    }

    private static ServerConfiguration conf(JsonNode r) {
        ServerConfiguration c = new ServerConfiguration();
        c.setLedgerDirNames(new String[] {r.get("dir").asText()});
        c.setEntryLogFilePreAllocationEnabled(false);
        c.setCompactionRateByEntries(1_000_000);
        if (r.has("logSizeLimit")) {
            c.setEntryLogSizeLimit(r.get("logSizeLimit").asLong());
        }
        return c;
    }

    private static LedgerDirsManager dirs(ServerConfiguration c) throws Exception {
        return new LedgerDirsManager(c, c.getLedgerDirs(), new DiskChecker(0.99f, 0.99f));
    }

    private static ArrayNode addAll(EntryLogger el, JsonNode entries) throws Exception {
        ArrayNode locs = JSON.createArrayNode();
        for (JsonNode e : entries) {
            locs.add(el.addEntry(e.get("ledger").asLong(), Unpooled.wrappedBuffer(hex(e.get("data")))));
        }
        return locs;
    }

    /** Writes entries with DefaultEntryLogger; `rollover` finishes the log (ledgers map) at the end. */
    private static JsonNode defaultWrite(JsonNode r) throws Exception {
        ServerConfiguration c = conf(r);
        DefaultEntryLogger el = new DefaultEntryLogger(c, dirs(c));
        ArrayNode locs = addAll(el, r.get("entries"));
        if (r.path("rollover").asBoolean(false)) {
            ((EntryLogManagerBase) el.getEntryLogManager()).createNewLog(EntryLogger.UNASSIGNED_LEDGERID);
        }
        el.flush();
        el.close();
        ObjectNode o = JSON.createObjectNode();
        o.set("locations", locs);
        return o;
    }

    private static JsonNode defaultRead(JsonNode r) throws Exception {
        ReadOnlyDefaultEntryLogger el = new ReadOnlyDefaultEntryLogger(conf(r));
        ArrayNode res = JSON.createArrayNode();
        try {
            for (JsonNode q : r.get("reads")) {
                ObjectNode o = res.addObject();
                try {
                    ByteBuf b = q.has("ledger")
                            ? el.readEntry(q.get("ledger").asLong(), q.get("entry").asLong(), q.get("location").asLong())
                            : el.readEntry(q.get("location").asLong());
                    o.put("data", hex(b));
                    b.release();
                } catch (Exception e) {
                    o.put("error", e.getClass().getName());
                    o.put("message", String.valueOf(e.getMessage()));
                }
            }
        } finally {
            el.close();
        }
        return res;
    }

    private static JsonNode defaultScan(JsonNode r) throws Exception {
        ReadOnlyDefaultEntryLogger el = new ReadOnlyDefaultEntryLogger(conf(r));
        ArrayNode recs = JSON.createArrayNode();
        try {
            el.scanEntryLog(r.get("logId").asLong(), new EntryLogScanner() {
                @Override
                public boolean accept(long ledgerId) {
                    return true;
                }

                @Override
                public void process(long ledgerId, long offset, ByteBuf entry) {
                    ObjectNode o = recs.addObject();
                    o.put("ledger", ledgerId);
                    o.put("offset", offset);
                    o.put("data", hex(entry));
                }
            });
        } finally {
            el.close();
        }
        return recs;
    }

    /**
     * What `bookkeeper shell readjournal` reads: Journal.scanJournal over one journal file of a journal
     * directory's current/ (`dir`), from its start. Each record as its offset, ids, size and sha256.
     */
    private static JsonNode journalScan(JsonNode r) throws Exception {
        ServerConfiguration c = new ServerConfiguration();
        File current = new File(r.get("dir").asText());
        c.setJournalDirName(current.getParent());
        c.setLedgerDirNames(new String[] {current.getParent()});
        Journal journal = new Journal(0, current, c, dirs(c));
        ArrayNode recs = JSON.createArrayNode();
        ObjectNode o = JSON.createObjectNode();
        journal.scanJournal(r.get("journalId").asLong(), 0L, new Journal.JournalScanner() {
            @Override
            public void process(int journalVersion, long offset, java.nio.ByteBuffer entry) {
                ObjectNode rec = recs.addObject();
                rec.put("version", journalVersion);
                rec.put("offset", offset);
                java.nio.ByteBuffer b = entry.duplicate();
                rec.put("size", b.remaining());
                rec.put("ledger", b.remaining() >= 8 ? b.getLong(b.position()) : -1);
                rec.put("entry", b.remaining() >= 16 ? b.getLong(b.position() + 8) : -1);
                byte[] bytes = new byte[b.remaining()];
                b.get(bytes);
                rec.put("sha256", sha256(bytes));
            }
        }, false);
        o.set("records", recs);
        return o;
    }

    private static String sha256(byte[] bytes) {
        try {
            return ByteBufUtil.hexDump(java.security.MessageDigest.getInstance("SHA-256").digest(bytes));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** readlog over a whole ledger directory: every entry log under `dir`/current, each record's sha256. */
    private static JsonNode defaultScanAll(JsonNode r) throws Exception {
        ReadOnlyDefaultEntryLogger el = new ReadOnlyDefaultEntryLogger(conf(r));
        ObjectNode out = JSON.createObjectNode();
        try {
            for (JsonNode idNode : r.get("logIds")) {
                long id = idNode.asLong();
                ArrayNode recs = out.putArray(Long.toString(id));
                el.scanEntryLog(id, new EntryLogScanner() {
                    @Override
                    public boolean accept(long ledgerId) {
                        return true;
                    }

                    @Override
                    public void process(long ledgerId, long offset, ByteBuf entry) throws java.io.IOException {
                        ObjectNode o = recs.addObject();
                        o.put("ledger", ledgerId);
                        o.put("offset", offset);
                        o.put("entry", entry.getLong(entry.readerIndex() + 8));
                        byte[] bytes = new byte[entry.readableBytes()];
                        entry.getBytes(entry.readerIndex(), bytes);
                        o.put("sha256", sha256(bytes));
                    }
                });
            }
        } finally {
            el.close();
        }
        return out;
    }

    private static ObjectNode metaJson(EntryLogMetadata m) {
        ObjectNode o = JSON.createObjectNode();
        o.put("logId", m.getEntryLogId());
        o.put("totalSize", m.getTotalSize());
        o.put("remainingSize", m.getRemainingSize());
        ObjectNode l = o.putObject("ledgers");
        m.getLedgersMap().forEach((lid, size) -> l.put(Long.toString(lid), size));
        return o;
    }

    /** getEntryLogMetadata (map, else scan), and separately the map alone (null when unreadable). */
    private static JsonNode defaultMetadata(JsonNode r) throws Exception {
        ServerConfiguration c = conf(r);
        ReadOnlyDefaultEntryLogger el = new ReadOnlyDefaultEntryLogger(c);
        long id = r.get("logId").asLong();
        ObjectNode o = JSON.createObjectNode();
        try {
            o.set("metadata", metaJson(el.getEntryLogMetadata(id, new AbstractLogCompactor.Throttler(c))));
            try {
                o.set("fromIndex", metaJson(el.extractEntryLogMetadataFromIndex(id)));
            } catch (Exception e) {
                o.putNull("fromIndex");
                o.put("indexError", e.getClass().getName() + ": " + e.getMessage());
            }
        } finally {
            el.close();
        }
        return o;
    }

    /** Writes entries with DirectEntryLogger (O_DIRECT, native-io); `close` writes the ledgers map. */
    private static JsonNode directWrite(JsonNode r) throws Exception {
        ServerConfiguration c = conf(r);
        LedgerDirsManager ldm = dirs(c);
        ExecutorService w = Executors.newSingleThreadExecutor();
        ExecutorService f = Executors.newSingleThreadExecutor();
        long maxFileSize = r.path("maxFileSize").asLong(1L << 20);
        DirectEntryLogger d = new DirectEntryLogger(ldm.getAllLedgerDirs().get(0), new EntryLogIdsImpl(ldm, Slogger.NULL),
                new NativeIOImpl(), UnpooledByteBufAllocator.DEFAULT, w, f, maxFileSize, 1 << 20,
                4L << 20, 4L << 20, 64 << 10, 1, 300, Slogger.NULL, NullStatsLogger.INSTANCE);
        ArrayNode locs;
        List<Long> flushed = new ArrayList<>();
        try {
            locs = addAll(d, r.get("entries"));
            d.flush();
            flushed.addAll(d.getFlushedLogIds());
            if (r.path("close").asBoolean(true)) {
                d.close();
            }
        } finally {
            w.shutdown();
            f.shutdown();
        }
        ObjectNode o = JSON.createObjectNode();
        o.set("locations", locs);
        ArrayNode fl = o.putArray("flushedLogIds");
        flushed.forEach(fl::add);
        return o;
    }

    private static DigestType digestType(String name) {
        return name.equalsIgnoreCase("MAC") ? DigestType.HMAC : DigestType.valueOf(name.toUpperCase());
    }

    private static DigestManager digestManager(JsonNode r) throws Exception {
        return DigestManager.instantiate(r.get("ledger").asLong(), hex(r.path("password")),
                digestType(r.get("type").asText()), UnpooledByteBufAllocator.DEFAULT, false);
    }

    /** The stored bytes (`ByteBufList.coalesce` of the v3 package) for each entry. */
    private static JsonNode digestPack(JsonNode r) throws Exception {
        DigestManager dm = digestManager(r);
        byte[] masterKey = DigestManager.generateMasterKey(hex(r.path("password")));
        ArrayNode res = JSON.createArrayNode();
        for (JsonNode e : r.get("entries")) {
            ByteBufList l = (ByteBufList) dm.computeDigestAndPackageForSending(e.get("entry").asLong(),
                    e.get("lac").asLong(), e.get("length").asLong(), Unpooled.wrappedBuffer(hex(e.get("payload"))),
                    masterKey, 0);
            ByteBuf b = ByteBufList.coalesce(l);
            res.add(hex(b));
            b.release();
            l.release();
        }
        return res;
    }

    private static JsonNode digestVerify(JsonNode r) throws Exception {
        DigestManager dm = digestManager(r);
        ArrayNode res = JSON.createArrayNode();
        for (JsonNode e : r.get("items")) {
            ObjectNode o = res.addObject();
            try {
                ByteBuf b = dm.verifyDigestAndReturnData(e.get("entry").asLong(), Unpooled.wrappedBuffer(hex(e.get("data"))));
                o.put("ok", true);
                o.put("payload", hex(b));
            } catch (Exception ex) {
                o.put("ok", false);
                o.put("error", ex.getClass().getName());
            }
        }
        return res;
    }

    // DbLedgerStorage's own RocksDB wrapper, read-only, on a ledgers/ or locations/ index: every key
    // and value (ledger records decoded) and getFloor answers, which is how it finds a last entry.
    private static JsonNode dbIndexDump(JsonNode r) throws Exception {
        String sub = r.get("sub").asText();
        KeyValueStorageFactory.DbConfigType type = sub.equals("locations")
                ? KeyValueStorageFactory.DbConfigType.EntryLocation
                : KeyValueStorageFactory.DbConfigType.LedgerMetadata;
        ObjectNode res = JSON.createObjectNode();
        ArrayNode entries = res.putArray("entries");
        try (KeyValueStorageRocksDB db = new KeyValueStorageRocksDB(r.get("basePath").asText(), sub, type,
                new ServerConfiguration(), true)) {
            try (KeyValueStorage.CloseableIterator<Map.Entry<byte[], byte[]>> it = db.iterator()) {
                while (it.hasNext()) {
                    Map.Entry<byte[], byte[]> e = it.next();
                    ObjectNode o = entries.addObject();
                    o.put("key", ByteBufUtil.hexDump(e.getKey()));
                    o.put("value", ByteBufUtil.hexDump(e.getValue()));
                    if (sub.equals("ledgers")) {
                        DbLedgerStorageDataFormats.LedgerData d = DbLedgerStorageDataFormats.LedgerData.parseFrom(e.getValue());
                        o.put("exists", d.getExists());
                        o.put("fenced", d.getFenced());
                        o.put("masterKey", ByteBufUtil.hexDump(d.getMasterKey().toByteArray()));
                    }
                }
            }
            ArrayNode floors = res.putArray("floors");
            for (JsonNode k : r.path("floorKeys")) {
                Map.Entry<byte[], byte[]> f = db.getFloor(hex(k));
                if (f == null) {
                    floors.addNull();
                } else {
                    floors.add(ByteBufUtil.hexDump(f.getKey()));
                }
            }
            res.put("count", db.count());
        }
        return res;
    }

    // LedgerMetadataSerDe, as the BookKeeper client reads ledger metadata from the metadata store;
    // the parsed metadata is serialized again so the other side can parse Java's bytes too.
    private static JsonNode ledgerMetadataParse(JsonNode r) throws Exception {
        LedgerMetadataSerDe serDe = new LedgerMetadataSerDe();
        LedgerMetadata m = serDe.parseConfig(hex(r.get("data")), r.get("ledger").asLong(), Optional.empty());
        ObjectNode o = JSON.createObjectNode();
        o.put("formatVersion", m.getMetadataFormatVersion());
        o.put("state", m.getState().name());
        o.put("closed", m.isClosed());
        o.put("lastEntryId", m.getLastEntryId());
        o.put("length", m.getLength());
        o.put("ensembleSize", m.getEnsembleSize());
        o.put("writeQuorumSize", m.getWriteQuorumSize());
        o.put("ackQuorumSize", m.getAckQuorumSize());
        o.put("digestType", m.getDigestType().name());
        o.put("password", ByteBufUtil.hexDump(m.getPassword()));
        o.put("ctime", m.getCtime());
        ObjectNode custom = o.putObject("customMetadata");
        for (Map.Entry<String, byte[]> e : m.getCustomMetadata().entrySet()) {
            custom.put(e.getKey(), ByteBufUtil.hexDump(e.getValue()));
        }
        ObjectNode ensembles = o.putObject("ensembles");
        for (Map.Entry<Long, ? extends List<BookieId>> e : m.getAllEnsembles().entrySet()) {
            ArrayNode a = ensembles.putArray(String.valueOf(e.getKey()));
            for (BookieId b : e.getValue()) {
                a.add(b.toString());
            }
        }
        o.put("reserialized", ByteBufUtil.hexDump(serDe.serialize(m)));
        return o;
    }
}
