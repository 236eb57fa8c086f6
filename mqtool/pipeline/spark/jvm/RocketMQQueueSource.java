package mqtool.spark;

/** format("rocketmq_cq") in the JVM: one row per consume queue unit, as RocketMQSource reads. */
public final class RocketMQQueueSource extends RocketMQSource {
  @Override
  public String shortName() {
    return "rocketmq_cq";
  }
}
