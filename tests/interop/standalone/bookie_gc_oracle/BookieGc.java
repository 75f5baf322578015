import java.io.File;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Paths;
import java.time.Duration;
import org.apache.bookkeeper.conf.ServerConfiguration;
import org.apache.pulsar.metadata.bookkeeper.BKCluster;

/**
 * BookKeeper's own garbage collector on a copy of a Pulsar 4.0.7 standalone's data directory.
 *
 * <p>The bookie is started exactly as {@code PulsarStandalone.startBookieWithMetadataStore()} starts it:
 * a {@code ServerConfiguration} loaded from the standalone's conf, then {@code BKCluster} with the
 * metadata service {@code rocksdb://<absolute metadata dir>} (which it turns into
 * {@code metadata-store:rocksdb://...} with Pulsar's metadata drivers), the bookie dir as its journal and
 * ledger dir, and the address its cookie records. Only the GC settings (below, and the disk-pressure
 * thresholds in the conf the test writes) and the bookie's HTTP admin server differ. A forced GC is triggered with the manual trigger ({@code PUT /api/v1/bookie/gc}, i.e.
 * {@code LedgerStorage.forceGC()}), waited for ({@code GET /api/v1/bookie/gc} until
 * {@code is_in_force_gc} is false: the flag is cleared in {@code runWithFlags}' finally block), and the
 * bookie is shut down cleanly. Run it from the directory holding {@code data/}, like the standalone.
 *
 * <p>Arguments: standalone.conf, metadata dir, bookkeeper dir (relative), HTTP port, major threshold.
 * Prints {@code GC-STATUS <json>} (gc_details after the run) and {@code GC-DONE}.
 */
public class BookieGc {
    public static void main(String[] args) {
        try {
            run(args);
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1); // a failed start leaves non-daemon threads behind
        }
        System.exit(0);
    }

    static void run(String[] args) throws Exception {
        String confFile = args[0];
        String metadataDir = args[1];
        String bkDir = args[2];
        int httpPort = Integer.parseInt(args[3]);
        double majorThreshold = Double.parseDouble(args[4]);

        ServerConfiguration conf = new ServerConfiguration();
        conf.loadConf(new File(confFile).toURI().toURL());
        // Major compaction stays enabled (interval 1 day), its threshold raised; the scheduled GC stays
        // an hour away (gcWaitTime from the conf), so the only run is the forced one below.
        conf.setMajorCompactionThreshold(majorThreshold);
        // No throttle worth the name (pulsarkit's side runs with none): GC's metadata scans and compaction
        // copies share this rate.
        conf.setCompactionRateByEntries(1_000_000_000);
        conf.setCompactionRateByBytes(1_000_000_000);
        conf.setProperty("httpServerEnabled", true);
        conf.setProperty("httpServerClass", "org.apache.bookkeeper.http.vertx.VertxHttpServer");
        conf.setProperty("httpServerHost", "127.0.0.1");
        conf.setProperty("httpServerPort", httpPort);

        String metadataStoreUrl = "rocksdb://" + Paths.get(metadataDir).toAbsolutePath();
        BKCluster cluster = BKCluster.builder()
                .baseServerConfiguration(conf)
                .metadataServiceUri(metadataStoreUrl)
                .numBookies(1)
                .dataDir(bkDir)
                .clearOldData(false)
                .build();
        try {
            HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
            String base = "http://127.0.0.1:" + httpPort + "/api/v1/bookie/";
            HttpResponse<String> put = http.send(
                    HttpRequest.newBuilder(URI.create(base + "gc")).PUT(HttpRequest.BodyPublishers.noBody()).build(),
                    HttpResponse.BodyHandlers.ofString());
            if (put.statusCode() != 200) {
                throw new IllegalStateException("PUT gc: " + put.statusCode() + " " + put.body());
            }
            System.out.println("GC-TRIGGERED " + put.body());
            long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            while (true) {
                String state = http.send(HttpRequest.newBuilder(URI.create(base + "gc")).GET().build(),
                        HttpResponse.BodyHandlers.ofString()).body();
                if (state.contains("\"false\"")) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("forced GC still running after 120 s: " + state);
                }
                Thread.sleep(100);
            }
            String details = http.send(HttpRequest.newBuilder(URI.create(base + "gc_details")).GET().build(),
                    HttpResponse.BodyHandlers.ofString()).body();
            System.out.println("GC-STATUS " + details.replace('\n', ' '));
        } finally {
            cluster.close();
        }
        System.out.println("GC-DONE");
    }
}
