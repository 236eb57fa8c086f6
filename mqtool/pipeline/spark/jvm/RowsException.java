package mqtool.spark;

/**
 * An error mqtool's row server answered with: its message is mqtool's own one line (a store that
 * is no store, a file gone since the plan, a bad option), which mqtool's command line shows as it
 * is (mqtool.pipeline.spark.engine.spark_errors) instead of Spark's stack of wrappers.
 */
public final class RowsException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public RowsException(String message) {
    super(message);
  }
}
