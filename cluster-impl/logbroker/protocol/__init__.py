"""The Kafka wire protocol subset we speak. kafka-python's generated message classes are the codec."""
