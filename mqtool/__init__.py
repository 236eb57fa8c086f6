"""mqtool: administration and forensics for Apache RocketMQ message stores."""

__version__ = "0.1.0"
