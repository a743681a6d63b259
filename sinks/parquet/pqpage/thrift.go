package pqpage

import "encoding/binary"

// Thrift compact protocol, only what the headers of a data page V1 and a
// dictionary page need: a struct of i32 fields and one nested struct.
const (
	thriftFalse  = 2 // a bool field's type holds its value
	thriftI32    = 5
	thriftStruct = 12
)

// pageHeader appends the Thrift (compact protocol) PageHeader of a data
// page V1 to b: type DATA_PAGE, the page's sizes and its DataPageHeader
// (values counted with nulls, the values' encoding, RLE levels). No
// statistics or CRC: both are optional, and the column chunk's statistics
// are in the footer.
func pageHeader(b []byte, uncompressed, compressed, numValues int32, enc int32) []byte {
	b = i32Field(b, 1, 0, 0) // type: DATA_PAGE
	b = i32Field(b, 2, 1, uncompressed)
	b = i32Field(b, 3, 2, compressed)
	b = append(b, 2<<4|thriftStruct) // 5: data_page_header (delta 2: no crc)
	b = i32Field(b, 1, 0, numValues)
	b = i32Field(b, 2, 1, enc)
	b = i32Field(b, 3, 2, encRLE) // definition_level_encoding
	b = i32Field(b, 4, 3, encRLE) // repetition_level_encoding
	b = append(b, 0)              // end of DataPageHeader
	return append(b, 0)           // end of PageHeader
}

// i32Field appends field id (the previous field being prev) holding v.
func i32Field(b []byte, id, prev int, v int32) []byte {
	b = append(b, byte(id-prev)<<4|thriftI32)
	return binary.AppendUvarint(b, uint64(uint32(v<<1)^uint32(v>>31)))
}

// dictPageHeader appends the PageHeader of a dictionary page: type
// DICTIONARY_PAGE, the page's sizes and its DictionaryPageHeader (the
// entries, their encoding, is_sorted false: as arrow-go writes it).
func dictPageHeader(b []byte, uncompressed, compressed, numValues int32, enc int32) []byte {
	b = i32Field(b, 1, 0, 2) // type: DICTIONARY_PAGE
	b = i32Field(b, 2, 1, uncompressed)
	b = i32Field(b, 3, 2, compressed)
	b = append(b, 4<<4|thriftStruct) // 7: dictionary_page_header
	b = i32Field(b, 1, 0, numValues)
	b = i32Field(b, 2, 1, enc)
	b = append(b, 1<<4|thriftFalse) // 3: is_sorted
	b = append(b, 0)                // end of DictionaryPageHeader
	return append(b, 0)             // end of PageHeader
}
