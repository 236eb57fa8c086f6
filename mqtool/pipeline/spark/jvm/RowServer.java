package mqtool.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;

/**
 * mqtool's row server (python -m mqtool.pipeline.spark.rowserver), one per JVM and Python: every
 * decision about stores, partitions and rows is made there, by the same code the Python data
 * source runs; this JVM only asks and carries the answers.  A request is a length-prefixed
 * JSON object; the answer starts with a byte: 'J' (a length-prefixed JSON object follows),
 * 'A' (an Arrow IPC stream follows, to the end of the connection) or 'E' (a length-prefixed
 * error message follows).  Every request and every JSON answer carries the protocol's version
 * ("v"): a server of another version refuses the request, and this side refuses its answers.
 */
final class RowServer {
  static final ObjectMapper JSON = new ObjectMapper();
  /** The row server protocol this reader speaks: rowserver.PROTOCOL on the Python side. */
  static final int PROTOCOL = 2;
  private static final Map<String, RowServer> SERVERS = new HashMap<>();
  private static final long START_SECONDS = 300;

  private final Process process;
  private final Path socket;

  private RowServer(String python) {
    Path dir = null;
    try {
      dir = Files.createTempDirectory("mqtool-rows-");   // rwx------: only this user connects
      socket = dir.resolve("socket");
      ProcessBuilder builder = new ProcessBuilder(python, "-m", "mqtool.pipeline.spark.rowserver", socket.toString(),
          Integer.toString(workers()));
      builder.redirectError(ProcessBuilder.Redirect.INHERIT);
      process = builder.start();     // its stdin stays open: the server leaves when this JVM does
    } catch (IOException e) {
      removeQuietly(dir);
      throw new IllegalStateException("cannot start mqtool's row server with " + python + ": " + e.getMessage(), e);
    }
    try {
      awaitReady(python);
    } catch (IOException | RuntimeException e) {
      process.destroy();
      removeQuietly(dir);
      throw e instanceof IllegalStateException ? (IllegalStateException) e
          : new IllegalStateException("mqtool's row server with " + python + ": " + e.getMessage(), e);
    }
    Path made = dir;
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      process.destroy();
      removeQuietly(made);
    }));
  }

  /** As many workers as this executor runs tasks at once (spark.executor.cores), at most the CPUs. */
  private static int workers() {
    int cpus = Runtime.getRuntime().availableProcessors();
    SparkEnv env = SparkEnv.get();
    return env == null ? cpus : Math.max(1, Math.min(cpus, env.conf().getInt("spark.executor.cores", cpus)));
  }

  private static void removeQuietly(Path dir) {
    if (dir == null) {
      return;
    }
    try {
      Files.deleteIfExists(dir.resolve("socket"));
      Files.deleteIfExists(dir);
    } catch (IOException ignored) {
      // a temporary directory left behind
    }
  }

  private void awaitReady(String python) throws IOException {
    BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    Thread timer = new Thread(() -> {
      try {
        if (!process.waitFor(START_SECONDS, TimeUnit.SECONDS)) {
          process.destroy();
        }
      } catch (InterruptedException ignored) {
        // the server is up: nothing to wait for
      }
    });
    timer.setDaemon(true);
    timer.start();
    String line = out.readLine();
    timer.interrupt();
    if (!"ready".equals(line)) {
      throw new IllegalStateException("mqtool's row server did not start (" + python
          + " -m mqtool.pipeline.spark.rowserver; is mqtool installed for that Python?)");
    }
  }

  /** The server of this JVM for the Python that Spark's Python workers run (see python()). */
  static synchronized RowServer get(String python) {
    RowServer server = SERVERS.get(python);
    if (server == null || !server.process.isAlive()) {
      server = new RowServer(python);
      SERVERS.put(python, server);
    }
    return server;
  }

  /**
   * The Python to run: option python, else (planning, on the driver) spark.mqtool.driverPython,
   * else spark.mqtool.python, spark.pyspark.python, $PYSPARK_PYTHON, python3.
   */
  static String python(Map<String, String> options, boolean driver) {
    String chosen = options.get("python");
    if (chosen != null && !chosen.isEmpty()) {
      return chosen;
    }
    SparkEnv env = SparkEnv.get();
    if (env != null) {
      SparkConf conf = env.conf();
      String[] keys = driver
          ? new String[] {"spark.mqtool.driverPython", "spark.mqtool.python", "spark.pyspark.python"}
          : new String[] {"spark.mqtool.python", "spark.pyspark.python"};
      for (String key : keys) {
        if (conf.contains(key) && !conf.get(key).isEmpty()) {
          return conf.get(key);
        }
      }
    }
    String fromEnv = System.getenv("PYSPARK_PYTHON");
    return fromEnv != null && !fromEnv.isEmpty() ? fromEnv : "python3";
  }

  /** A connection with the request sent; the caller reads the answer and closes it. */
  Connection send(Object request) throws IOException {
    SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
    try {
      channel.connect(UnixDomainSocketAddress.of(socket));
      Map<String, Object> versioned = new java.util.LinkedHashMap<>();
      versioned.put("v", PROTOCOL);
      if (request instanceof Map<?, ?> fields) {
        for (Map.Entry<?, ?> e : fields.entrySet()) {
          versioned.put(String.valueOf(e.getKey()), e.getValue());
        }
      }
      byte[] body = JSON.writeValueAsBytes(versioned);
      ByteBuffer head = ByteBuffer.allocate(4).putInt(0, body.length);
      OutputStream out = Channels.newOutputStream(channel);
      out.write(head.array());
      out.write(body);
      out.flush();
      return new Connection(channel);
    } catch (IOException e) {
      channel.close();
      throw e;
    }
  }

  /** A JSON request answered with JSON; an 'E' answer is a RowsException of its message. */
  JsonNode ask(Object request) {
    try (Connection c = send(request)) {
      return c.json();
    } catch (IOException e) {
      throw new IllegalStateException("mqtool's row server: " + e.getMessage(), e);
    }
  }

  static final class Connection implements AutoCloseable {
    private final SocketChannel channel;
    final DataInputStream in;

    Connection(SocketChannel channel) {
      this.channel = channel;
      this.in = new DataInputStream(new java.io.BufferedInputStream(Channels.newInputStream(channel), 1 << 16));
    }

    /** The answer's kind byte; an error answer is thrown (RowsException: mqtool's own message). */
    byte kind() throws IOException {
      byte kind = in.readByte();
      if (kind == 'E') {
        throw new RowsException(text());
      }
      return kind;
    }

    JsonNode json() throws IOException {
      byte kind = kind();
      if (kind != 'J') {
        throw new IOException("unexpected answer " + (char) kind);
      }
      JsonNode answer = JSON.readTree(text());
      JsonNode v = answer.get("v");
      if (v == null || v.asInt() != PROTOCOL) {
        throw new RowsException("mqtool's row server speaks protocol " + (v == null ? "1" : v.asText())
            + ", this JVM reader protocol " + PROTOCOL + ": run the same mqtool on the driver and the executors");
      }
      return answer;
    }

    InputStream stream() throws IOException {
      byte kind = kind();
      if (kind != 'A') {
        throw new IOException("unexpected answer " + (char) kind);
      }
      return in;
    }

    /** After a stream: 'K', or the read's error (RowsException: mqtool's own message). */
    void trailer() throws IOException {
      int kind = in.read();
      if (kind == 'E') {
        throw new RowsException(text());
      }
      if (kind != 'K') {
        throw new IOException("mqtool's row server ended a partition's rows early");
      }
    }

    private String text() throws IOException {
      byte[] body = new byte[in.readInt()];
      in.readFully(body);
      return new String(body, StandardCharsets.UTF_8);
    }

    @Override
    public void close() throws IOException {
      channel.close();
    }
  }
}
