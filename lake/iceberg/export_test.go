package iceberg

// StampName is stampName, for the tests.
var StampName = stampName
