"""What a broker does before its store sees a message: brokerprops (properties, CLUSTER, WAIT,
half messages), compression (the producer's codecs), spec (the JSON-lines message shape).
"""
