package mqtool.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** One partition's Arrow batches from the row server, each as a Spark columnar batch of the
 * columns the query reads (none for count(*): the rows are still counted). */
final class ArrowPartitionReader implements PartitionReader<ColumnarBatch> {
  private static final RootAllocator ROOT = new RootAllocator(Long.MAX_VALUE);

  private final RowServer.Connection connection;
  private final BufferAllocator allocator;
  private final ArrowStreamReader stream;
  private final StructType required;
  private ColumnarBatch batch;

  ArrowPartitionReader(RowServer server, String reader, String part, StructType required) {
    this.required = required;
    Map<String, Object> request = new LinkedHashMap<>();
    request.put("op", "read");
    request.put("reader", reader);
    request.put("part", part);
    RowServer.Connection opened = null;
    BufferAllocator made = null;
    try {
      opened = server.send(request);
      made = ROOT.newChildAllocator("mqtool-rows", 0, Long.MAX_VALUE);
      stream = new ArrowStreamReader(opened.stream(), made);
    } catch (IOException | RuntimeException e) {
      if (made != null) {
        made.close();
      }
      closeQuietly(opened);
      if (e instanceof IOException) {
        throw new UncheckedIOException("mqtool's row server: " + e.getMessage(), (IOException) e);
      }
      throw (RuntimeException) e;
    }
    connection = opened;
    allocator = made;
  }

  private static void closeQuietly(RowServer.Connection c) {
    if (c != null) {
      try {
        c.close();
      } catch (IOException ignored) {
        // closing what failed
      }
    }
  }

  @Override
  public boolean next() throws IOException {
    if (!stream.loadNextBatch()) {
      connection.trailer();      // the read's own verdict: a failed read is never a short partition
      return false;
    }
    VectorSchemaRoot root = stream.getVectorSchemaRoot();
    ColumnVector[] vectors = new ColumnVector[required.fields().length];
    for (int i = 0; i < vectors.length; i++) {
      vectors[i] = new ArrowColumnVector(root.getVector(required.fields()[i].name()));
    }
    batch = new ColumnarBatch(vectors, root.getRowCount());
    return true;
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  @Override
  public void close() throws IOException {
    try {
      stream.close();
    } finally {
      try {
        allocator.close();
      } finally {
        connection.close();
      }
    }
  }
}
