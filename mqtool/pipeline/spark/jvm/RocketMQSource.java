package mqtool.spark;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * format("rocketmq") in the JVM (and format("rocketmq_cq"): RocketMQQueueSource): the columns a
 * query reads (column pruning) and its simple
 * filters go to mqtool's row server, which plans the partitions and decodes each one with the
 * same code as the Python data source (mqtool.pipeline.spark.sources); its Arrow batches become
 * Spark's columnar batches as they are.  The rows are the Python data source's, only the
 * columns nobody reads are never made.
 */
public class RocketMQSource implements TableProvider, DataSourceRegister {
  @Override
  public String shortName() {
    return "rocketmq";
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    Map<String, String> given = options.asCaseSensitiveMap();
    Map<String, Object> request = new LinkedHashMap<>();
    request.put("op", "schema");
    request.put("source", shortName());
    request.put("options", given);
    JsonNode answer = RowServer.get(RowServer.python(given, true)).ask(request);
    return StructType.fromDDL(answer.get("ddl").asText());
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;    // spark.read.schema("topic string, storeSize int") picks columns, as in Python
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    return new RocketMQTable(shortName(), schema, new HashMap<>(properties));
  }

  static List<List<String>> columns(StructType schema) {
    List<List<String>> out = new ArrayList<>();
    for (StructField f : schema.fields()) {
      out.add(List.of(f.name(), f.dataType().simpleString()));
    }
    return out;
  }

  static final class RocketMQTable implements Table, SupportsRead {
    private final String source;
    private final StructType schema;
    private final Map<String, String> options;

    RocketMQTable(String source, StructType schema, Map<String, String> options) {
      this.source = source;
      this.schema = schema;
      this.options = options;
    }

    @Override
    public String name() {
      return source;
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap scanOptions) {
      Map<String, String> all = new HashMap<>(options);
      all.putAll(scanOptions.asCaseSensitiveMap());
      return new RocketMQScan(source, schema, all);
    }
  }

  /** The scan builder, the scan and its batch: one object, as nothing is shared between them. */
  static final class RocketMQScan implements ScanBuilder, SupportsPushDownRequiredColumns,
      SupportsPushDownFilters, Scan, Batch {
    private final String source;
    private final StructType schema;
    private final Map<String, String> options;
    private StructType required;
    private final List<Map<String, Object>> pushed = new ArrayList<>();
    private final List<Filter> pushedFilters = new ArrayList<>();

    RocketMQScan(String source, StructType schema, Map<String, String> options) {
      this.source = source;
      this.schema = schema;
      this.options = options;
      this.required = schema;
    }

    /** The columns a query reads, whole: Spark's nested pruning may ask for a part of a struct
     * (problems.kind), and the reader hands over a column as the table has it. */
    @Override
    public void pruneColumns(StructType requiredSchema) {
      StructType whole = new StructType();
      for (String name : requiredSchema.fieldNames()) {
        whole = whole.add(schema.apply(name));
      }
      required = whole;
    }

    /** The simple filters the reader takes (it skips files and records that fail them, so Spark
     * need not apply them again); the reader's row server says which. */
    @Override
    public Filter[] pushFilters(Filter[] filters) {
      List<Map<String, Object>> specs = new ArrayList<>();
      List<Filter> simple = new ArrayList<>();
      List<Filter> left = new ArrayList<>();
      for (Filter f : filters) {
        Map<String, Object> spec = simple(f);
        if (spec != null) {
          specs.add(spec);
          simple.add(f);
        } else {
          left.add(f);
        }
      }
      if (!specs.isEmpty()) {
        Map<String, Object> request = new LinkedHashMap<>();
        request.put("op", "push");
        request.put("source", source);
        request.put("filters", specs);
        JsonNode taken = RowServer.get(RowServer.python(options, true)).ask(request).get("taken");
        boolean[] pushedHere = new boolean[specs.size()];
        for (JsonNode i : taken) {
          pushedHere[i.asInt()] = true;
        }
        for (int i = 0; i < specs.size(); i++) {
          if (pushedHere[i]) {
            pushed.add(specs.get(i));
            pushedFilters.add(simple.get(i));
          } else {
            left.add(simple.get(i));
          }
        }
      }
      return left.toArray(new Filter[0]);
    }

    @Override
    public Filter[] pushedFilters() {
      return pushedFilters.toArray(new Filter[0]);
    }

    private static Map<String, Object> simple(Filter f) {
      String op;
      String column;
      Object value;
      if (f instanceof EqualTo e) {
        op = "eq"; column = e.attribute(); value = e.value();
      } else if (f instanceof In i) {
        op = "in"; column = i.attribute(); value = java.util.Arrays.asList(i.values());
      } else if (f instanceof GreaterThan g) {
        op = "gt"; column = g.attribute(); value = g.value();
      } else if (f instanceof GreaterThanOrEqual g) {
        op = "ge"; column = g.attribute(); value = g.value();
      } else if (f instanceof LessThan l) {
        op = "lt"; column = l.attribute(); value = l.value();
      } else if (f instanceof LessThanOrEqual l) {
        op = "le"; column = l.attribute(); value = l.value();
      } else {
        return null;
      }
      if (column.contains(".") || column.contains("`")) {
        return null;     // a nested field: not a column of the source
      }
      Map<String, Object> out = new LinkedHashMap<>();
      out.put("op", op);
      out.put("column", column);
      out.put("value", value);
      return out;
    }

    @Override
    public Scan build() {
      return this;
    }

    @Override
    public StructType readSchema() {
      return required;
    }

    @Override
    public String description() {
      return source + " " + required.simpleString() + (pushed.isEmpty() ? "" : " pushed " + pushed);
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    private String plannedReader;

    @Override
    public InputPartition[] planInputPartitions() {
      Map<String, Object> request = new LinkedHashMap<>();
      request.put("op", "plan");
      request.put("source", source);
      request.put("options", options);
      request.put("schema", columns(schema));
      request.put("columns", required.fields().length > 0 ? columns(required) : countColumn());
      request.put("filters", pushed);
      JsonNode answer = RowServer.get(RowServer.python(options, true)).ask(request);
      plannedReader = answer.get("reader").asText();
      JsonNode parts = answer.get("parts");
      InputPartition[] out = new InputPartition[parts.size()];
      for (int i = 0; i < out.length; i++) {
        out[i] = new Part(parts.get(i).asText());
      }
      return out;
    }

    /** The column the reader hands over when a query reads none (count(*)): the rows are counted
     * by it; the table's first int column, the least to make and carry. */
    private List<List<String>> countColumn() {
      for (StructField f : schema.fields()) {
        if (f.dataType() instanceof IntegerType) {
          return List.of(List.of(f.name(), "int"));
        }
      }
      return List.of(columns(schema).get(0));
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new Factory(plannedReader, required, options.get("python"));
    }
  }

  /** One partition of the plan: the row server's own description of it (versioned JSON text). */
  record Part(String blob) implements InputPartition, Serializable {}

  static final class Factory implements PartitionReaderFactory {
    private final String reader;
    private final StructType required;
    private final String python;

    Factory(String reader, StructType required, String python) {
      this.reader = reader;
      this.required = required;
      this.python = python;
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
      return true;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new UnsupportedOperationException("rocketmq reads columnar batches only");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
      Map<String, String> options = new HashMap<>();
      if (python != null) {
        options.put("python", python);
      }
      return new ArrowPartitionReader(RowServer.get(RowServer.python(options, false)), reader,
          ((Part) partition).blob(), required);
    }
  }
}
